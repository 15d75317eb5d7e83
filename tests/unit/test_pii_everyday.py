"""PII screening of everyday, integration, document and finance text (rules read off the
dev_u, dev_v, dev_w and dev_x writers)."""

# ruff: noqa: RUF001 - the cases are written in other scripts on purpose

from __future__ import annotations

import pytest

from engram.memory.gate.pii import PiiKind, scan

FOUND = [
    # short secrets only their name makes secret
    (PiiKind.SECRET_ASSIGNMENT, "mum's HDFC ATM pin is 4826, keep it off the fridge note"),
    (PiiKind.SECRET_ASSIGNMENT, "UPI PIN: 902731 for the family account"),
    (PiiKind.SECRET_ASSIGNMENT, "guest wifi SSID: Casa-Lopez  key: Rt7pQ2vXmL9sWk4e"),
    (PiiKind.SECRET_ASSIGNMENT, "Kraken recovery codes a8k2-9fqz, m3xp-7tw1 in the safe"),
    (PiiKind.SECRET_ASSIGNMENT, "authenticator seed for the bank: JBSW Y3DP EHPK 3PXP QR7A"),
    (PiiKind.SECRET_ASSIGNMENT, "request had Cookie: sid=Hq8ZbX2mPwL5vN7tRk3sYc; Path=/"),
    # ids by their layout or their name
    (PiiKind.NATIONAL_ID, "35202-1234567-1 Ahmed Raza, copy for the lease"),
    (PiiKind.NATIONAL_ID, "her pan is abcpe1234f, typed in lower case"),
    (PiiKind.NATIONAL_ID, "Chinedu's NIN slip came through: 12345678901 for the bank"),
    (PiiKind.NATIONAL_ID, "voter id ABC1234567 for the polling booth"),
    (PiiKind.NATIONAL_ID, "کد ملی for Reza 0010350829 at the notary"),
    (PiiKind.US_SSN, "uncle's ss# 401963958 for the CPA"),
    # accounts and phones
    (PiiKind.BANK_ACCOUNT, "FNB cheque acc 62990045500 branch code 250655"),
    (PiiKind.BANK_ACCOUNT, "CLABE de la proveedora 012180534852646025 (BBVA)"),
    (PiiKind.PHONE, "sent the movers wa.me/971552615494 to coordinate"),
    (PiiKind.PHONE, "if the gate is locked Suresh is at 99509 34676"),
    (PiiKind.PHONE, "Bilal plumber (DHA ph 6) - 0300-9424276, comes after jumma"),
    # documents and records as scanners, OCR and payment systems write them (ICAO specimens)
    (PiiKind.NATIONAL_ID, "KYC: L898902C36UTO7408122F1204159ZE184226B<<<<<10 matched"),
    (PiiKind.NATIONAL_ID, "ID card I<UTOD231458907<<<<<<<<<<<<<<< scanned for the wallet"),
    (PiiKind.NATIONAL_ID, "second row 7408122F1204159UTO<<<<<<<<<<<6 from the upload"),
    (PiiKind.BANK_ACCOUNT, "NACHA entry 6220210000218871062932291 0000184250 payroll credit"),
    (PiiKind.PAYMENT_CARD, "POS dump, track 1: %B4111111111111111^DOE/JOHN^27121010000000?"),
    (PiiKind.PAYMENT_CARD, "card box reads:  3782  822463  10005  Exp 11/26"),
    (PiiKind.BANK_ACCOUNT, "OCR  of  form:  Sort  code  60-97-41  Account  no.  19302747"),
    (PiiKind.NATIONAL_ID, "sin:120 420 724 provided by the applicant"),
    (PiiKind.NATIONAL_ID, "steuer_id=44987263014 kyc_level=2 country=DE"),
    (PiiKind.NATIONAL_ID, "OCR licence 4d.  DONNE 804192 CJ9TW  5. issued 2024"),
    (
        PiiKind.AWS_SECRET_ACCESS_KEY,
        "Secret half of the archive IAM key is EsQh2n0oJbEwaTJVwIhRhqf+aLK6OY8yL39B8mGl",
    ),
    (
        PiiKind.SECRET_ASSIGNMENT,
        '<property name="hibernate.connection.password">CBca*KKcUOY@61</property>',
    ),
    (PiiKind.SECRET_ASSIGNMENT, "she read out her portal password (Koala!Sunset42) to save time"),
    (PiiKind.PHONE, "pediu retorno no celular (21) 99472-3318 sobre o chargeback"),
    # US and Canadian health, legal and HR documents
    (PiiKind.NATIONAL_ID, "e-Rx from Dr. Whitcombe, DEA BW8890166, fill ok"),
    (PiiKind.NATIONAL_ID, "Rendering provider is an individual (type 1) NPI: 1269245274"),
    (PiiKind.NATIONAL_ID, "marketplace reconciliation uses ITIN 987-83-4176 from her 1095-A"),
    (PiiKind.NATIONAL_ID, "BC PHN 9583 715 507 for the snowbird patient"),
    (PiiKind.NATIONAL_ID, "Employee's EAD shows USCIS# A557-757-470, category C09"),
    (PiiKind.NATIONAL_ID, "illinois dl M133-4276-3786, exp 2027, matches the subpoena"),
    (PiiKind.NATIONAL_ID, "TRICARE: sponsor's DoD ID 9119056595 keyed into DEERS"),
    (PiiKind.SECRET_ASSIGNMENT, "Epic test login for the new MA is dhall / yJnalF_7LY*5M!"),
    # labels in other scripts (read folded, as the scanner reads the text)
    (PiiKind.SECRET_ASSIGNMENT, '管理画面のパスワードは "fxkRG*e1JUgb" です'),
    (PiiKind.SECRET_ASSIGNMENT, "пароль от 1С: 8n-dq-D29L*o, не пересылай"),
    (PiiKind.SECRET_ASSIGNMENT, "访客 Wi-Fi 密码：*Pwrx0j4#w6#（每月更换）"),
    (PiiKind.PHONE, "Driver 王师傅，手机 139 9010 6205，wait at 虹桥 T2"),
    (PiiKind.PHONE, "ask Γιώργος, κινητό 697 618 9837, before noon"),
    (PiiKind.NATIONAL_ID, "เลขประจำตัวประชาชน 1-5696-34576-54-4 for payroll"),
    (PiiKind.NATIONAL_ID, "מספר תעודת זהות 337670053 for the Haifa new hire"),
    (PiiKind.NATIONAL_ID, '{"name": "Sato Yui", "my_number": "399925201375"}'),
    (PiiKind.NATIONAL_ID, "РНОКПП 3244936073 for the Lviv freelancer's contract"),
    (PiiKind.BANK_ACCOUNT, "薪轉帳戶 中國信託 (822) 帳號 2214-2754-4651 for the hire"),
    (PiiKind.API_KEY, "AccessKeyId=LTAI5toGmjuttWTTbtj3RTAJ for the OSS bucket"),
    # telecom, fleets and public services (Brazil, Argentina, Africa, Europe)
    (PiiKind.PAYMENT_CARD, "Cartão Elo 6363 6851 8160 8015 charged twice for the fee"),
    (PiiKind.PAYMENT_CARD, "hipercard:6062822337368236 exp 09/27, retry tomorrow"),
    (PiiKind.PHONE, "Telemóvel da mãe: 912 384 601; fixo só de manhã"),
    (PiiKind.PHONE, "Portabilidade: cliente wants to keep (11) 97842-5749 on prepaid"),
    (PiiKind.PHONE, "alerts publish to sms/outbound/254722953285, the owner's own mobile"),
    (PiiKind.BANK_ACCOUNT, "PIX chave aleatória 8ca7f33b-7639-4d8b-b4f7-b31333e59065 for her"),
    (PiiKind.BANK_ACCOUNT, "Banco do Brasil, agência 9073-5, conta corrente 26.217.952-0"),
    (PiiKind.NATIONAL_ID, "DNI 38.654.371 es de Tomás, el voluntario del comedor"),
    (PiiKind.NATIONAL_ID, "BVN: 22568511777 needed before the loan is disbursed"),
    (PiiKind.NATIONAL_ID, "French passport 60AV15955 of the volunteer"),
    (PiiKind.NATIONAL_ID, "rijbewijsnummer 4570932236 for the Utrecht driver"),
    (PiiKind.NATIONAL_ID, "RICA done using the owner's ID 8603129381086 and a bill"),
    (PiiKind.SECRET_ASSIGNMENT, 'network={ ssid="Depot-Ops-5G" psk="82cz5DGUTCvAgavg1v" }'),
    (PiiKind.SECRET_ASSIGNMENT, "device_key: b9f19f466a33a83b7dc8765191aca957 for uplink signing"),
    # vendor keys
    (PiiKind.API_KEY, "netlify deploy --auth nfp_XscMsBZAXEngjlfLmR5Cx5Hd3aa5sufOYnpz --prod"),
    (
        PiiKind.API_KEY,
        'dsn: "https://0298fc02ead3f581125b91d2c27e6c16@o4934299.ingest.us.sentry.io/46345"',
    ),
    (
        PiiKind.API_KEY,
        "braintree access_token$production$yvcbbnw3vljzuwwh$d6d584def7ce1395bcf7f2e39c39147d",
    ),
]

NOT_FOUND = [
    "the PIN code of the Bengaluru office is 560001",
    "Meralco SIN 4012 3456 78 for the condo, bill due 20 July",
    "lost phone IMEI 356789104523673 reported, block request 88213",
    '"mobilesdk_app_id": "1:434204072536:android:f706", "project_number": "434204072536"',
    "MapView uses the public token pk.eyJ1IjoidGlkZXBvb2wiLCJhIjoiY21ybDEifQ.7exc9JwdP2ari2",
    "a frying pan is 2024 model X1234",
    # "pass" as a verb, not a password (a retrieval-set memory, 2026-11-28)
    "the one thing she lets pass is Parmesan, even though it uses animal rennet",
    "what the inspector will pass is Grade-B timber only",
    "backup codes are printed in the settings page",
    "Cookie: theme=dark; lang=en-GB",
    "the wifi key is on the router sticker",
    "Vault token tok_9aQ2Lk7mZ1xP4vR8wT3s replaces the card number downstream",
    "Sort code 40-47-84 is an HSBC branch; no account number supplied yet",
    "ABA 128153509 is the routing number on the cheque; we still need the account number",
    "MRZ-like noise P<<<<<<<<<<< and 123456789<<< with no valid check digits",
    "Group NPI 1919769772 (type 2, Lakeside Family Medicine PLLC) goes in box 33a",
    "Claimant's routing (ABA) is 260181785; still waiting on her actual account number",
    "the login page is at /auth / sso for every clinic",
    "QQ号 2898446324 是她的工作号, used only for the vendor group chat",
    "ООО «Волга Партс»: ИНН 7792452370, ОГРН 1439466349200 for the supplier",
    "ΑΦΜ εταιρείας 094201080 (Aegean Freight) printed on the invoice header",
    "Mã số thuế công ty 0342425118 — xuất hóa đơn VAT for March",
    "사업자등록번호 905-87-62992 goes on the tax invoice",
    "La cooperativa factura con CUIT 30-95211863-9 (persona jurídica)",
    "KRA PIN P051987340Q belongs to the NGO itself, not to any staff member",
    "Inscrição imobiliária 019.063.0034-1 — endereço da creche, para o IPTU",
    "the release is 10.100.200 and build v2.3.1 of the app",
]


@pytest.mark.parametrize(("kind", "text"), FOUND)
def test_everyday_and_integration_pii_is_found(kind: PiiKind, text: str) -> None:
    """Each text yields a finding of its kind."""
    assert kind in {finding.kind for finding in scan(text)}, text


@pytest.mark.parametrize("text", NOT_FOUND)
def test_look_alikes_are_not_findings(text: str) -> None:
    """Postal PIN codes, device ids, public tokens and words without values are left alone."""
    assert [] == scan(text)
