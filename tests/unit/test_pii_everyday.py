"""PII screening of everyday and integration text (rules read off the dev_u and dev_v writers)."""

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
    "backup codes are printed in the settings page",
    "Cookie: theme=dark; lang=en-GB",
    "the wifi key is on the router sticker",
]


@pytest.mark.parametrize(("kind", "text"), FOUND)
def test_everyday_and_integration_pii_is_found(kind: PiiKind, text: str) -> None:
    """Each text yields a finding of its kind."""
    assert kind in {finding.kind for finding in scan(text)}, text


@pytest.mark.parametrize("text", NOT_FOUND)
def test_look_alikes_are_not_findings(text: str) -> None:
    """Postal PIN codes, device ids, public tokens and words without values are left alone."""
    assert [] == scan(text)
