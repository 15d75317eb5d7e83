"""PII screening: per-kind detection, exact spans, overlap resolution, value hygiene, corpus."""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engram.memory.gate import pii
from engram.memory.gate.pii import DETECTOR, DETECTOR_VERSION, PiiFinding, PiiKind, scan
from engram.observability.metrics import PII_DETECTORS

DATA = Path(__file__).resolve().parents[1] / "data"
#: The corpus the detectors were written against: the first one and the two dev writers'
#: files (tests/data/pii/README.md). The test writers' files are read by benchmarks only.
CORPUS = (
    DATA / "pii_corpus.tsv",
    DATA / "pii" / "dev_l.tsv",
    DATA / "pii" / "dev_n.tsv",
    DATA / "pii" / "dev_o.tsv",
    DATA / "pii" / "dev_p.tsv",
    DATA / "pii" / "dev_q.tsv",
    DATA / "pii" / "dev_r.tsv",
    DATA / "pii" / "dev_s.tsv",
    DATA / "pii" / "dev_t.tsv",
)

# Vendor tokens are assembled here rather than written whole, so that secret scanners do not
# take this file for a leak. Each is well formed and random-looking, and revokes nothing.
GITHUB_PAT = "ghp_" + "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5"
SLACK_BOT = "xoxb-" + "482910375520-7721093847561-" + "Qm2Lp7Rt3Vw8Zc1Nb5Hj6Kf0"
SLACK_HOOK = (
    "https://hooks.slack.com/services/" + "T4XKQ2M7P/B7JD2N6WQ3R/" + "Zc1Nb5Hj6Kf0Gs4Xy8Tq2Lm9"
)
STRIPE_LIVE = "sk_" + "live_" + "4fHk29XmQpL7vRt2ZwYb8NcJ"
AWS_KEY_ID = "AKIA" + "Z7Q2X4V6B8N0M3K5"
AWS_SECRET = "wK8s2Lq9" + "Zp4Xv7Rt1Nb6Hj3Mf0Ce5Y" + "+/Ga2Ui8Po"
OPENAI_KEY = "sk-" + "proj-" + "Qm2Lp7Rt3Vw8Zc1Nb5Hj6Kf0Gs4Xy8Tq"
GOOGLE_KEY = "AIza" + "SyD4mQ7xLp3RtV8wZc1Nb5Hj6Kf0Gs4Xy8T"
GITLAB_PAT = "glpat-" + "Xk29fLm3Qp7RtV8wZc1N"


def _b64url(data: dict[str, object]) -> str:
    raw = json.dumps(data, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


JWT = ".".join(
    [
        _b64url({"alg": "HS256", "typ": "JWT"}),
        _b64url({"sub": "user_8842", "iat": 1718035200}),
        "dBjftJeZ4CVPmB92K27uhbUJU1p1r_wW1gFWFOEjXk",
    ]
)
PEM_BODY = "MIIEowIBAAKCAQEAq8xZ0yG3mK9vN2pL5tR8wQ1eJ4hU7cB6dF0aS3iO9nM2kY5x"
PRIVATE_KEY = f"-----BEGIN RSA PRIVATE KEY----- {PEM_BODY} -----END RSA PRIVATE KEY-----"


def _spans(text: str) -> list[tuple[PiiKind, str]]:
    return [(finding.kind, text[finding.start : finding.end]) for finding in scan(text)]


def _load_corpus() -> list[tuple[frozenset[PiiKind], str]]:
    cases: list[tuple[frozenset[PiiKind], str]] = []
    lines = [line for path in CORPUS for line in path.read_text(encoding="utf-8").splitlines()]
    for line in lines:
        if not line.strip() or line.startswith("#"):
            continue
        label, _, text = line.partition("\t")
        kinds = frozenset() if label == "none" else frozenset(PiiKind(k) for k in label.split(","))
        cases.append((kinds, text))
    return cases


POSITIVES = [
    (PiiKind.EMAIL, "Send the digest to {v} on Mondays.", "ops+digest@quillstack.com"),
    (PiiKind.EMAIL, "Contact: {v}.", "marta.duarte@lusoteca.pt"),
    (PiiKind.PHONE, "Customer prefers a callback at {v} after 4pm.", "(415) 555-0132"),
    (PiiKind.PHONE, "Sam's mobile is {v} while in London.", "+44 20 7946 0958"),
    (PiiKind.PHONE, "Phone: {v} (UK landline).", "020 7946 0958"),
    (PiiKind.US_SSN, "The W-4 lists {v} for the employee.", "536-22-1942"),
    (PiiKind.US_SSN, "Her SSN, {v}, was pasted by mistake.", "536221942"),
    (PiiKind.NATIONAL_ID, "National Insurance number {v}.", "AB 12 34 56 C"),
    (PiiKind.NATIONAL_ID, "Spanish DNI {v} on the passport copy.", "12345678Z"),
    (PiiKind.NATIONAL_ID, "The NIE is {v}.", "X1234567L"),
    (PiiKind.NATIONAL_ID, "Codice fiscale {v} of the owner.", "RSSMRA85T10A562S"),
    (PiiKind.NATIONAL_ID, "Her SIN is {v} per the T4 slip.", "130 692 544"),
    (PiiKind.NATIONAL_ID, "Dutch BSN {v} of the new hire.", "123456782"),
    (PiiKind.NATIONAL_ID, "Steuer-ID {v} for payroll.", "86 095 742 719"),
    (PiiKind.NATIONAL_ID, "INSEE number {v} on the Carte Vitale.", "1 84 12 76 451 089 46"),
    (PiiKind.NATIONAL_ID, "Aadhaar {v} came with the KYC form.", "4991 1866 5246"),
    (PiiKind.NATIONAL_ID, "PAN {v} for the TDS certificate.", "ABCPE1234F"),
    (PiiKind.PAYMENT_CARD, "Corporate card {v}, expires 09/27.", "4111 1111 1111 1111"),
    (PiiKind.PAYMENT_CARD, "Amex {v} was declined.", "378282246310005"),
    (PiiKind.PAYMENT_CARD, "Refund to {v}.", "5555-5555-5555-4444"),
    (PiiKind.IBAN, "Pay the freelancer to IBAN {v}.", "DE89 3704 0044 0532 0130 00"),
    (PiiKind.IBAN, "Compact form: {v}.", "GB82WEST12345698765432"),
    (PiiKind.AWS_ACCESS_KEY_ID, "Found {v} in an old CI log.", AWS_KEY_ID),
    (PiiKind.AWS_SECRET_ACCESS_KEY, "aws_secret_access_key = {v}", AWS_SECRET),
    (PiiKind.GITHUB_TOKEN, "CI uses {v} for releases.", GITHUB_PAT),
    (PiiKind.SLACK_TOKEN, "Bot token: {v}.", SLACK_BOT),
    (PiiKind.SLACK_TOKEN, "Alerts go to {v} from Grafana.", SLACK_HOOK),
    (PiiKind.STRIPE_KEY, "Live key {v} belongs in the vault.", STRIPE_LIVE),
    (PiiKind.JWT, "The session cookie was {v}.", JWT),
    (PiiKind.PRIVATE_KEY, "Deploy key: {v} (rotate it).", PRIVATE_KEY),
    (PiiKind.URL_PASSWORD, "DATABASE_URL=postgresql://app:{v}@db:5432/app", "Vx7pQ2rT9kLm"),
    (PiiKind.URL_PASSWORD, "Broker amqp://orders:{v}@mq.internal:5672/ is live.", "r4bb1t-s3cret"),
    (PiiKind.SECRET_ASSIGNMENT, "api_key={v}", "9fK2mQ7xLp3RtV8wZc1N"),
    (PiiKind.SECRET_ASSIGNMENT, 'DB_PASSWORD="{v}"', "Tr0ub4dor&3"),
    (PiiKind.SECRET_ASSIGNMENT, "Remember the staging password is {v}.", "Pl4tform!Stg"),
    (PiiKind.SECRET_ASSIGNMENT, "Authorization: Basic {v}", "YWRtaW46czNjcjN0UGFzcw=="),
    # Kinds and rules added from the dev writers' misses (tests/data/pii/README.md); these
    # examples are written here, not taken from any labelled file.
    (PiiKind.NATIONAL_ID, "Passport no. {v} is on the visa form.", "X7731925"),
    (PiiKind.NATIONAL_ID, "Her driving licence number is {v}.", "MORGA753116SM9IJ"),
    (PiiKind.NATIONAL_ID, "PESEL {v} belongs to the new hire.", "88031401009"),
    (PiiKind.NATIONAL_ID, "The refund form lists {v}.", "382.519.460-42"),
    (PiiKind.NATIONAL_ID, "Her registration record shows {v}.", "790921-1123403"),
    (PiiKind.NATIONAL_ID, "Swiss AHV {v} on the payslip.", "756.3047.5009.00"),
    (PiiKind.NATIONAL_ID, "The export held {v} in the pnr column.", "19820411-3008"),
    (PiiKind.NATIONAL_ID, "Singapore NRIC {v} for the access card.", "S1000000I"),
    (PiiKind.BANK_ACCOUNT, "Bank details for the payout: account number {v}.", "40219988"),
    (PiiKind.BANK_ACCOUNT, "Refund it to {v} please.", "12-3140-0171008-00"),
    (PiiKind.BANK_ACCOUNT, "ACH routing {v} for the vendor.", "021000212"),
    (PiiKind.API_KEY, "Summaries call OpenAI with {v}.", OPENAI_KEY),
    (PiiKind.API_KEY, "Maps use {v} on the site.", GOOGLE_KEY),
    (PiiKind.API_KEY, "GitLab mirror token {v}.", GITLAB_PAT),
    (PiiKind.PHONE, "WhatsApp me at {v} when you land.", "6421 903 4471"),
    (PiiKind.PHONE, "Sipho, the driver: {v}.", "082 555 0143"),
    (PiiKind.PHONE, "ALERT_SMS_TO={v}", "+46701234567"),
    (PiiKind.IBAN, "Refund to {v} please.", "gb82west12345698765432"),
    (PiiKind.SECRET_ASSIGNMENT, "The wifi password {v} is on the fridge.", "Wq7!mZ2pLr"),
    (PiiKind.SECRET_ASSIGNMENT, "The router password got changed to {v} today.", "Hq4$rT9wLx"),
    (PiiKind.SECRET_ASSIGNMENT, '<add key="PaymentsApiSecret" value="{v}" />', "Jq8Lm2Xv7R3Zp9W"),
    (PiiKind.SECRET_ASSIGNMENT, "PAROLA: {v} for the admin portal.", "Qz7!mK2pLw9"),
    (PiiKind.NATIONAL_ID, "The claimant's CUIL is {v}.", "27-28033719-1"),
    (PiiKind.NATIONAL_ID, "Cliente {v} pidió el reembolso.", "12.531.909-2"),
    (PiiKind.NATIONAL_ID, "Pojištěnec {v} prefers mornings.", "785112/1003"),
    (PiiKind.NATIONAL_ID, "TC Kimlik No: {v} for the SGK file.", "12345670008"),
    (PiiKind.PAYMENT_CARD, "TROY kart {v} son kullanma 07/27.", "9792151234567893"),
    (PiiKind.PHONE, "Phone: ring ham på {v} i aften.", "31 84 27 65"),
    (PiiKind.NATIONAL_ID, "Croatian contractor OIB: {v} on every invoice.", "69182403184"),
    (PiiKind.NATIONAL_ID, "Greek employee, AMKA {v}, starts Monday.", "15038510002"),
    (PiiKind.NATIONAL_ID, "Verify CNIC {v} before paying.", "35202-1234567-1"),
    (PiiKind.NATIONAL_ID, "Supplier NIK {v} (KTP on file).", "3174011505900001"),
    (PiiKind.NATIONAL_ID, "Passport for the trip: {v}, expires 2031.", "JR6NRY7T2"),
    (PiiKind.PAYMENT_CARD, "Replace the virtual card {v} everywhere.", "4273.1651.8204.5537"),
    (PiiKind.US_SSN, "Her social is {v}, for the 1099.", "536 22 1942"),
    (PiiKind.SECRET_ASSIGNMENT, "Portal login: user dnagy, jelszó {v}", "Nyar#Csiga42"),
    (PiiKind.NATIONAL_ID, "The carrier registration lists {v}.", "F123456784"),
    (PiiKind.NATIONAL_ID, 'Sample row: {"hkid": "{v}", "district": "Sha Tin"}', "K345670(6)"),
    (PiiKind.NATIONAL_ID, "Cédula de ciudadanía {v}, issued in Bogotá.", "1.020.734.518"),
    (PiiKind.PAYMENT_CARD, "The client pays with a Mir card {v} only.", "2200712345678902"),
    (PiiKind.IBAN, "Vendor IBAN{v}, same bank.", "GB82WEST12345698765432"),
    (PiiKind.SECRET_ASSIGNMENT, 'variable "db_password" { default = "{v}" }', "Hq4rT9wLxZ2m"),
    (PiiKind.SECRET_ASSIGNMENT, "<password>{v}</password> for user etl", "Mr%bIw7DMB-2NCx"),
    (PiiKind.EMAIL, "Reply to {v} about the RMA.", "dana.fox[at]example[dot]org"),
    (PiiKind.EMAIL, "Invoices go to {v}, not the inbox.", "ap(at)freight-co(dot)com(dot)au"),
    (PiiKind.EMAIL, "She typed {v} with spaces.", "J.Okafor  @  outlook.example.com"),
    (PiiKind.EMAIL, "GET /unsubscribe?email={v}&list=weekly", "lucy.h%40example.net"),
    (
        PiiKind.EMAIL,
        "Please send the quote to {v} by Friday.",
        "priya dot nair at example dot co dot uk",
    ),
    (
        PiiKind.PHONE,
        "Voicemail: call me back on {v}, cheers.",
        "three one two, five five five, oh one four two",
    ),
    (PiiKind.PAYMENT_CARD, "OCR of the receipt: MC {v}, confirm it.", "222l 4257 3997 6353"),
    (
        PiiKind.SECRET_ASSIGNMENT,
        "Le mot de passe du compte est {v} pour la famille.",
        "zOwLzBZTTbh0TMC5",
    ),
    (PiiKind.SECRET_ASSIGNMENT, ".pgpass line: db.internal:5432:*:app:{v}", "Vx7pQ2rT9kLm"),
    (
        PiiKind.SECRET_ASSIGNMENT,
        '{"auths": {"reg.example": {"auth": "{v}"}}}',
        "Y2ktYm90OlhxN21MMnBSOXdaaw==",
    ),
    (PiiKind.SECRET_ASSIGNMENT, "Cookie: sessionid={v}; path=/", "q7x2mz9k4p1w8r3t6y5u0v"),
    (
        PiiKind.SECRET_ASSIGNMENT,
        "TOTP seed for the admin account: {v}",
        "JBSWY3DPEHPK3PXPQ7RSTUVWXY234567",
    ),
    (PiiKind.PHONE, "urgent? just try{v} today", "+4915223419876"),
]

NEGATIVES = [
    "Cron mail goes to admin@localhost on the build box.",
    "Clone git@github.com:acme/engram.git for the sources.",
    "Order #2125550143 shipped on 12/03/2024.",
    "Build number 4155550132 is unrelated to any phone.",
    "Upgraded fastapi from 0.110.3 to 0.115.6.",
    "Trace 550e8400-e29b-41d4-a716-446655440000 shows the slow query.",
    "The VPN gateway is 203.0.113.45 and DNS is 192.168.1.53.",
    "SSN 987-65-4321 is in the advertising range and never issued.",
    "Sample SSN 078-05-1120 is on the blocklist.",
    "Reference 123456782 appeared twice in the export.",
    "The SIN function returned 0.8415.",
    "Card 4111 1111 1111 1112 fails the Luhn check.",
    "EAN barcode 4006381333931 on the box.",
    "IBAN DE89 3704 0044 0532 0130 01 has a wrong checksum.",
    "The AWS docs use AKIAIOSFODNN7EXAMPLE as a sample access key.",
    "Use the AWS secret access key from the vault, never inline.",
    "ghp_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx is the placeholder in the docs.",
    "Set SLACK_BOT_TOKEN=xoxb-your-bot-token before running locally.",
    "Stripe test keys look like sk_test_ and sk_test_123 is rejected.",
    "eyJ is the base64 prefix of a JSON object.",
    "PEM header -----BEGIN PUBLIC KEY----- is the public half.",
    "-----BEGIN OPENSSH PRIVATE KEY----- must be followed by the key body.",
    "Connection template: postgresql://user:password@localhost:5432/engram",
    "Use redis://default:${REDIS_PASSWORD}@cache:6379 in the helm values.",
    "api_key=YOUR_KEY_HERE in the README template.",
    "password=changeme is the dev default.",
    'api_key = os.environ["ENGRAM_API_KEY"]',
    "max_tokens=4096 and tokenizer: bert-base-uncased",
    'hash = "sha256:3d5f8a7c2e1b9f4a6c0d8e2b5a7f9c1e3d5b7a9c2e4f6a8b0c1d3e5f7a9b2c4d"',
    "password_policy: minimum 12 characters, one digit, one symbol.",
    "K8s secret data: password: cGFzc3dvcmQ= (base64 of the word password)",
    "The API key is rotated every 90 days by the platform team.",
    "The AWS account 123456789012 hosts staging; billing goes through the bank.",
    "Passport photos are taken on floor 2 next to the bank.",
    "Account opened on 2024-05-01 at the bank branch.",
    "Booking ref K7QX2M for the flight; passport check at gate 12.",
    "Keys start with sk- followed by random characters.",
    "Maps keys are AIza followed by 35 characters.",
    "Set HF_TOKEN=hf_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx in CI.",
    "Passport renewal costs 75 EUR and takes 6 weeks.",
    "The driver's licence test is on 12 March 2026.",
    "Order 0612345678 was shipped to the branch.",
    "Customer account 00918273 was merged in the CRM; refund pending.",
    "Call rotation starts 2024-07-01; dial-in 8812 4471.",
    "Tracking 1Z999AA10123456784 for the parcel to the bank.",
    "Use ${API_TOKEN:?missing} in the chart.",
    "Tracking 1Z 999 A1E 01 2345 678 4 for the parcel.",
    "Sagsnr. 2024-118734 was closed on 12.11.2026.",
    "Helm values: postgresql.auth.secretKeys.adminPasswordKey: postgres-password",
    "Build 2026.03.1127 promoted; rollback target 2026.02.0988.",
    "The SIN of the angle was computed as 0.70710678.",
    "Decorator @app.get('/healthz') returns 200.",
    "Order number seven five two one nine, delivered Tuesday.",
    "Look at the docs at example dot com for the setup.",
    "Secret lives at arn:aws:secretsmanager:eu-west-1:123456789012:secret:prod/db-AbC123 now.",
]


@pytest.mark.parametrize(
    ("kind", "template", "value"),
    POSITIVES,
    ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(POSITIVES)],
)
def test_each_kind_is_found_with_its_exact_span(kind: PiiKind, template: str, value: str) -> None:
    """A value of each kind is the one finding in its sentence, and its span slices the value."""
    text = template.replace("{v}", value)
    assert [(kind, value)] == _spans(text)


@pytest.mark.parametrize("text", NEGATIVES)
def test_hard_negatives_are_not_flagged(text: str) -> None:
    """Versions, ids, placeholders, failed checksums and references are not findings."""
    assert [] == scan(text)


def test_every_kind_has_a_positive_case() -> None:
    """The parametrised positives cover every kind the screen reports."""
    assert set(PiiKind) == {kind for kind, _, _ in POSITIVES}


def test_findings_are_sorted_and_disjoint() -> None:
    """Several findings in one text come back in text order and never overlap."""
    text = f"Mail kim@parcel.io, call (415) 555-0132, card 4111 1111 1111 1111, key {AWS_KEY_ID}."
    findings = scan(text)
    expected = [PiiKind.EMAIL, PiiKind.PHONE, PiiKind.PAYMENT_CARD, PiiKind.AWS_ACCESS_KEY_ID]
    assert expected == [finding.kind for finding in findings]
    assert all(a.end <= b.start for a, b in itertools.pairwise(findings))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"GITHUB_TOKEN={GITHUB_PAT}", [(PiiKind.GITHUB_TOKEN, GITHUB_PAT)]),
        (f"token={JWT}", [(PiiKind.JWT, JWT)]),
        (f'"private_key": "{PRIVATE_KEY}"', [(PiiKind.PRIVATE_KEY, PRIVATE_KEY)]),
        (f"aws_secret_access_key={AWS_SECRET}", [(PiiKind.AWS_SECRET_ACCESS_KEY, AWS_SECRET)]),
        (
            "postgres://admin:S3cr3tPw9@db.example.com/app",
            [(PiiKind.URL_PASSWORD, "S3cr3tPw9")],
        ),
        ("card 4111 1111 1111 1111", [(PiiKind.PAYMENT_CARD, "4111 1111 1111 1111")]),
        (
            "IBAN DE89 3704 0044 0532 0130 00",
            [(PiiKind.IBAN, "DE89 3704 0044 0532 0130 00")],
        ),
    ],
    ids=["github-over-assignment", "jwt-over-assignment", "key-over-assignment",
         "aws-over-assignment", "url-password-over-email", "card-over-phone", "iban-over-card"],
)  # fmt: skip
def test_overlaps_keep_the_most_specific_kind(
    text: str, expected: list[tuple[PiiKind, str]]
) -> None:
    """When detectors claim the same characters, only the most specific finding survives."""
    assert expected == _spans(text)


def test_resolution_prefers_priority_then_length() -> None:
    """Of overlapping spans the most specific kind wins, a longer span breaks a tie."""
    spans = [
        (PiiKind.EMAIL, 10, 40),
        (PiiKind.URL_PASSWORD, 10, 18),
        (PiiKind.SECRET_ASSIGNMENT, 50, 62),
        (PiiKind.SECRET_ASSIGNMENT, 50, 70),
        (PiiKind.PHONE, 0, 9),
    ]
    expected = [
        PiiFinding(PiiKind.PHONE, 0, 9),
        PiiFinding(PiiKind.URL_PASSWORD, 10, 18),
        PiiFinding(PiiKind.SECRET_ASSIGNMENT, 50, 70),
    ]
    assert expected == pii._resolve(spans)


def test_a_finding_holds_only_kind_and_span() -> None:
    """PiiFinding has no field for the value, and neither repr nor str shows it."""
    text = f"deploy with {GITHUB_PAT} today"
    (finding,) = scan(text)
    assert ["kind", "start", "end"] == [field.name for field in dataclasses.fields(PiiFinding)]
    assert not hasattr(finding, "__dict__")
    assert GITHUB_PAT not in repr(finding)
    assert GITHUB_PAT not in str(finding)
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.start = 0  # type: ignore[misc]


def test_detector_labels_match_the_metric() -> None:
    """The detector label is one the PII metric declares, and the version names it."""
    assert DETECTOR in PII_DETECTORS
    assert DETECTOR_VERSION.startswith(f"{DETECTOR}@")


@pytest.mark.parametrize("text", ["", "a", "     ", "12345", "\n\n\t"])
def test_empty_and_tiny_texts_have_no_findings(text: str) -> None:
    """Empty or very short text is scanned without error and yields nothing."""
    assert [] == scan(text)


@settings(max_examples=150, deadline=None)
@given(
    st.text(
        alphabet=st.sampled_from(list("0123456789 +-()./:@=_abcxyzAKIXEeyJ\n\"'é")), max_size=200
    )
)
def test_scan_never_fails_and_spans_stay_in_bounds(text: str) -> None:
    """On arbitrary text, scan returns sorted, disjoint spans inside the text."""
    findings = scan(text)
    assert all(0 <= f.start < f.end <= len(text) for f in findings)
    assert all(a.end <= b.start for a, b in itertools.pairwise(findings))


def test_corpus_has_the_agreed_shape() -> None:
    """The corpus has 1,000+ cases, 8+ positives per kind, and a large share of hard
    negatives."""
    cases = _load_corpus()
    positives_per_kind = {kind: sum(kind in kinds for kinds, _ in cases) for kind in PiiKind}
    negatives = sum(not kinds for kinds, _ in cases)
    assert 1000 <= len(cases)
    assert dict.fromkeys(PiiKind, True) == {k: n >= 8 for k, n in positives_per_kind.items()}
    assert 0.35 <= negatives / len(cases) <= 0.55


def test_corpus_meets_recall_and_false_positive_goals() -> None:
    """Recall over expected kinds is at least 0.97, and false-positive lines stay within 2%."""
    expected_total = found = negatives = false_positive_lines = 0
    for expected, text in _load_corpus():
        reported = {finding.kind for finding in scan(text)}
        expected_total += len(expected)
        found += len(expected & reported)
        negatives += not expected
        # A false positive: any finding on a negative line, or a kind the label does not list.
        false_positive_lines += bool(reported - expected)
    assert 0.97 <= found / expected_total
    assert 0.02 >= false_positive_lines / negatives
