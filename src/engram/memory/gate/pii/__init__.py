"""PII and secret screening for memory content: deterministic detectors that report spans.

:func:`scan` looks for personal identifiers and credentials in free text and returns one
:class:`PiiFinding` per hit: a kind and the ``[start, end)`` character span. The matched value
never leaves this package except as that span. No field holds it, nothing is logged, and no
exception is raised with it. The package is pure (no I/O, no logging, no global state after
import) and uses only the standard library, ``python-stdnum``, ``phonenumbers``, the word
lists of ``mnemonic`` and the number parser of ``text2num``.

What it detects
---------------
* ``email``: ``local@domain.tld`` with a dotted domain and an alphabetic TLD of 2+ letters.
  User info in a URL (``scheme://user@host``) and SSH remotes (``git@host:org/repo``) are not
  addresses.
* ``phone``: ``phonenumbers.PhoneNumberMatcher`` at leniency VALID, default region ``US``.
  It reads each run of digits and phone punctuation that no more specific finding (card,
  IBAN, id) already covers. Explicit ``+CC`` numbers of every country are read too. A number
  in national format (leading trunk ``0``, as in ``020 7946 0958``) counts only when a phone
  word (``phone``, ``tel``, ``mobile``, ``call``, ...) occurs in the text and one of a dozen
  common regions accepts it. A hit is dropped when it is glued to other token characters
  (``INV-2024-000123``) or follows an order, ticket, invoice, build or similar label
  (unless written with ``+`` and its country code, or named a phone before an order or a
  waybill of another language: ``Teléfono del guía:``).
* ``us_ssn``: ``AAA-GG-SSSS`` accepted by ``stdnum.us.ssn`` (no 000/666/9xx area, no 00 group,
  no 0000 serial, no published samples). Without dashes it also needs an SSN keyword before it.
* ``national_id``: UK NINO (prefix rules), Spanish DNI and NIE, Italian codice fiscale, French
  NIR, all checked by ``stdnum`` where a module exists. Formats made only of digits (Canadian
  SIN, Dutch BSN, German Steuer-ID, Indian Aadhaar) and the checksum-less Indian PAN are also
  flagged, but only when an identity keyword (``SIN``, ``BSN``, ``Steuer-ID``, ``Aadhaar``,
  ``PAN``, ...) comes up to 48 characters before them. The checksum has to pass too, where
  there is one. A random nine-digit number passes a Luhn or 11-proof check one time in ten,
  which is too often to trust on its own.
* ``payment_card``: 13 to 19 digits, grouped by spaces or dashes or not at all. They must pass
  the Luhn check, start with a known issuer prefix (Visa, Mastercard, Amex, Discover, Diners,
  JCB, UnionPay, Maestro) and have a length that issuer uses. Visa counts at 16 and 19 digits
  only: 13-digit Visa is retired, and EAN-13 barcodes starting with 4 look the same. A grouped
  run that continues an IBAN-like group before it (``DE89 3704 ...``) is not a card.
* ``iban``: country code, check digits and BBAN, accepted by ``stdnum.iban`` (country length
  and format, mod 97), in upper or lower case, its groups apart by up to two spaces.
* ``bank_account`` (``accounts``): an account number after an account word in a text about
  banking, a US routing number (checked), a UK sort code, an Australian BSB or a Canadian
  transit number after its name, and New Zealand and Norwegian account layouts by their
  check digits.
* more ``national_id`` (``documents``): a number after the name of an identity document or
  a local id (passport, driving licence, identity card, PESEL, personnummer, CPF, CURP, RRN,
  NRIC, IRD, TFN, NHS, PPS, AHV, a seafarer's book, ...), checked where that id has a check
  digit (not a pet's or a horse's passport, nor a form's stand-in of zeros), and a dozen
  countries' layouts that a check digit makes distinctive (Korean RRN, Brazilian CPF, Swedish
  personnummer, Swiss AHV, Belgian national number, ...) with no keyword.
* more ``national_id`` and ``bank_account`` (``mrz``): passport and identity-card
  machine-readable zone lines whose check digits hold, and the account of a NACHA entry
  record whose routing number checks.
* ``api_key`` (``vendors``): keys and tokens of some forty services by their documented
  prefix and shape (OpenAI, Anthropic, Google, GitLab, SendGrid, Twilio, npm, PyPI, Hugging
  Face, Vault, Azure storage, ...), the random part checked for length and entropy.
* ``aws_access_key_id``: ``AKIA``/``ASIA``/... followed by 16 upper-case letters and digits.
* ``aws_secret_access_key``: 40 base64 characters, only when an AWS secret keyword comes up to
  100 characters before them (``aws_secret_access_key=``, ``AWS secret``,
  ``SecretAccessKey``). The value must mix upper and lower case and have entropy >= 4.
* ``github_token``: ``ghp_``/``gho_``/``ghu_``/``ghs_``/``ghr_`` + 36 or more characters, and
  ``github_pat_`` fine-grained tokens.
* ``slack_token``: ``xoxb-``/``xoxp-``/``xoxa-``/``xoxr-``/``xoxs-``/``xoxo-`` tokens,
  rotating ``xoxe.xoxp-1-...`` tokens, app-level ``xapp-1-A…`` tokens and
  ``hooks.slack.com`` webhook URLs.
* ``stripe_key``: ``sk_``/``rk_`` + ``live_``/``test_`` keys and ``whsec_`` webhook secrets.
  A publishable key (``pk_``) is meant to ship in web pages and apps, and is not reported.
* ``jwt``: three base64url segments whose first segment decodes to a JSON object with
  ``"alg"``; not a token cut short where its signature would be (``eyJhbGci….eyJzdWIi…``,
  an ellipsis after the payload): no secret part is there, unless a run as long as a
  signature follows the ellipsis (the whole token, an ellipsis for its last dot).
* ``private_key``: a ``-----BEGIN ... PRIVATE KEY-----`` header (RSA, EC, DSA, OPENSSH,
  ENCRYPTED, PGP ``... PRIVATE KEY BLOCK``) followed by key material: at least one unbroken
  run of 24 base64 characters. A bare header mentioned in prose is not a key. The span runs
  to the matching END line, or to the end of the base64 body when the END line is missing.
  A PuTTY key file (``PuTTY-User-Key-File-3:``) is one when base64 lines follow its
  ``Private-Lines:``, in the clear or encrypted.
* ``url_password``: the password in ``scheme://user:password@host``, or given as a URL's
  ``password=`` parameter (``jdbc:sqlserver://host;password=…``, ``…?user=a&password=…``). It
  is not flagged when the password is empty or a placeholder.
* ``secret_assignment``: a value assigned to a secret-looking name: ``api_key=``,
  ``"client_secret": "..."``, ``DB_PASSWORD='...'``, ``token: ...``, ``the api key is ...``,
  ``api key 4f9b...``, ``Authorization: Bearer ...`` or ``Basic ...``. The name is one
  identifier, or two words (``api key``, ``db password``), followed by ``=``, ``:``, ``:=``,
  ``=>``, ``is``/``was`` or just a space. A short phrase may sit between name and operator
  (``the password for the router is ...``). The span is the value, without quotes. The
  rule:

  - the name, split into words (``snake_case``, ``kebab-case``, ``camelCase``), contains a
    password word (``password``, ``passwd``, ``pwd``, ``pass``, ``passphrase``, ``pw``) or a
    secret word (``secret``, ``token``, ``apikey``, ``credential(s)``, ``key`` after
    ``api``/``access``/``private``/``signing``/..., or an upper-case environment name ending
    in ``_KEY`` such as ``OPENAI_KEY``). A lower-case ``cache_key`` or ``sort_key`` is not
    secret, unless its value is a random token: any name ending in ``key``, given its value
    with ``:``, ``=`` or ``is`` (``rerank key: Qm7T…``), counts when the value has 24
    characters or more of letters, digits, ``-`` and ``_``, upper and lower case and digits,
    and at least 4 bits of entropy per character (a UUID or a hex digest has no capitals).
    The name contains no word that marks metadata (``hash``, ``name``, ``url``,
    ``id``, ``max``, ``type``, ``length``, ...);
  - the value is not a placeholder: empty, ``changeme``, ``your_key_here``, ``<...>``,
    ``${VAR}``, ``{{var}}``, ``$VAR``, ``****``, ``xxxx``, ``example``/``dummy``/``redacted``,
    and so on, nor base64 of such a placeholder (``cGFzc3dvcmQ=``). An unquoted value is not
    a reference either: a dotted path, a ``SCREAMING_SNAKE`` name, or a call or subscript
    such as ``os.environ[...]``. It holds no URL (``url_password`` covers those) and no
    ``sha256:`` style digest;
  - password values: length >= 8, Shannon entropy >= 2.5 bits/char, and at least two
    character classes (lower, upper, digit, symbol);
  - other values: length >= 12, Shannon entropy >= 3.0 bits/char, not only digits, and not a
    run of plain words (``bert-base-uncased``);
  - a value separated from its name by a space only (no ``=``, ``:`` or ``is``) must look
    random: length >= 20, entropy >= 3.5 bits/char, letters and digits.

  A secret named in prose further from its value than a short ``for ...``/``of ...`` phrase
  is missed. That is the price of not flagging every random-looking string. A few short
  secrets are known by their name alone: a card or banking PIN (``ATM pin is 7391``; a postal
  ``PIN code`` is not one), backup or recovery codes, an authenticator seed written in groups
  of four, a Wi-Fi network's ``key:``, a game server's ``sv_setsteamaccount`` login token,
  session values in a ``Cookie:`` header, and a code that opens a place or a device's
  controls (``garage keypad code is 7741#``, ``parental-control PIN: 5820``). A BitLocker
  recovery key (eight groups of six digits, each a multiple of 11) needs no name.
* in airline reservation records (``travel``): the document number of ``SSR DOCS``
  (``national_id``), the mobile of ``SSR CTCM`` (``phone``), the address of ``SSR CTCE``
  (``email``, ``//`` for ``@``) and the card of an ``FP CC…`` form of payment.
* cryptocurrency secrets (``crypto``): a wallet's recovery phrase (twelve or more words in a
  row from one language's BIP-39 list), an extended private key (``xprv…``), a private key in
  wallet import format (its base58check checksum must hold) and a raw key named as a private
  key (``secret_assignment``); keys assigned after an exchange's name and the key in a node
  provider's URL (``api_key``).

Precision and recall
--------------------
A finding quarantines a record for review: it does not reject it. A false positive costs a
human a look. A miss leaks a credential or an identifier into long-lived, widely retrieved
memory. So the detectors lean to recall where a validator can keep precision up: checksums
(Luhn, mod 97, stdnum check digits), issuer prefixes, decodable JWT headers. They use context
keywords only where the shape alone is too weak, as for digit-only national ids, bare SSNs and
AWS secrets. The labelled corpus ``tests/data/pii_corpus.tsv`` and ``benchmarks/pii_eval.py``
measure the trade-off; the goals are recall >= 0.97 and a false-positive rate <= 0.02 on the
hard negatives.

Known limits
------------
* Corsican NIRs (``2A``/``2B``), and national ids or phone numbers glued to other digits by
  a space (``SIN 046 454 286 2024``) are missed.
* A phone number in national format needs a phone word (a whole word) somewhere in the
  text and a region from ``_NATIONAL_REGIONS`` (in ``contact``), unless it is a mobile number
  of nine digits or more with its trunk 0, or an Indian mobile written in two groups of five.
  A number written with ``+`` and a country code counts when its length is possible for that
  country, assigned or not, and so does one in a WhatsApp link (``wa.me/971…``).
* A passport or licence number is recognised only after its document's name, by shape: a
  reference of the same shape just after the word (``passport check AB12CD34``) is flagged.
* Measured on text by writers the rules were never shown (``benchmarks/pii_eval.py --half
  test``, tests/data/pii/README.md).
* Cost grows with the number of digit runs, since each run goes to the phone matcher. A
  record with no digits scans in tens of microseconds. The matcher reads at most
  ``MAX_PHONE_RUNS`` (48) runs of seven digits or more; a text with more is reported as
  holding a phone number (the record is quarantined: the fail-safe side), so a 16,000-character
  digit soup scans in about 25 ms instead of 150.
* Text with look-alike characters (fullwidth digits, no-break spaces, Unicode hyphens,
  zero-width characters) is read folded to ASCII (NFKC, format characters dropped). A letter
  written decomposed (``e`` and U+0301, as macOS writes it; Hangul as jamo) is read
  composed; a mark no letter takes is read past on an ASCII character (underlined or
  struck-through digits), and so are Arabic harakat and tatweel and Hebrew points. Accented
  letters used as look-alikes of ASCII ones (``códe``) are not read as ASCII.
* Numbers said as words (transcripts, ``disguised`` for English, ``spoken`` for Spanish,
  French, German, Italian, Portuguese, Dutch, Polish, Turkish and Hindi digits) are read as
  digits with the words before them; a run of eight digits or more said after a phone word
  is a phone. At most ``MAX_SPOKEN_RUNS`` (32) such runs, or disguised runs (``evasion``),
  are read per text; a text with more is reported as holding a phone number, as for digit
  runs. Letters spelled with a spelling alphabet ("I come Imola", "C wie Cäsar") and
  numbers split by other words ("null dreißig, und dann …") are not read.
* Details written to get past a filter (``evasion``): digits split by emoji or spaced one
  by one, look-alike letters for digits ("4O2"), number words mixed with digits, keycap
  emoji, and addresses spelled a character at a time are read as a disguised run's digits or
  a joined address; digits written plainly are not read twice.
* Secrets in source code's idioms (``code``): typed declarations, Spring's ``@Value``,
  ``sshpass -p``/``mysql -p`` and PowerShell's ``ConvertTo-SecureString``.

Layout
------
* ``findings``: :class:`PiiKind`, :class:`PiiFinding`, the ``Span`` tuple the detectors yield
  and the scanned ``Text`` with the facts their pre-filters share.
* ``heuristics``: entropy, character classes, the placeholder test and keyword windows.
* ``contact``: ``email``, ``phone``.
* ``identifiers``: ``payment_card``, ``iban``, ``us_ssn``, ``national_id``.
* ``documents``: ``national_id`` named by its document, and distinctive national layouts.
* ``accounts``: ``bank_account``.
* ``credentials``: ``url_password``, ``private_key``, ``jwt`` and the AWS, GitHub, Slack and
  Stripe tokens.
* ``vendors``: ``api_key``.
* ``assignments``: ``secret_assignment``.
* ``pairs``: ``secret_assignment`` given as a login's pair or named for someone in capitals.
* this module: the order the detectors run in, the priorities that resolve overlapping spans,
  and :func:`scan`.

Adding a kind
-------------
1. Add a member to :class:`PiiKind` (in ``findings``) and a priority in ``_PRIORITY`` (here).
   When spans overlap, the higher priority wins; give a specific format a higher priority
   than a generic one.
2. Write a detector ``find_<kind>(t: Text) -> Iterator[Span]`` in the module of its family.
   It starts with a cheap pre-filter that returns at once on text that cannot match: a
   substring test on ``t.raw`` or ``t.lower``, or the digit count ``t.digits``. Only then
   does it run its regexes and the expensive validators. Case-insensitive regexes over the
   whole text are slow in ``re``; test the lowered text instead. Yield spans only.
3. Append it to ``_DETECTORS``. Add positives and hard negatives to the corpus, add cases
   to ``tests/unit/test_pii.py``, and bump :data:`DETECTOR_VERSION`.
"""

from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
from collections.abc import Callable, Iterator

from engram.memory.gate.pii.accounts import find_bank_accounts
from engram.memory.gate.pii.assignments import find_assignments
from engram.memory.gate.pii.code import find_code_secrets
from engram.memory.gate.pii.contact import find_emails, find_phones
from engram.memory.gate.pii.credentials import (
    find_aws,
    find_github,
    find_jwts,
    find_private_keys,
    find_slack,
    find_stripe,
    find_url_passwords,
)
from engram.memory.gate.pii.crypto import find_crypto_secrets
from engram.memory.gate.pii.disguised import find_obfuscated_emails, spoken_runs, unscanned
from engram.memory.gate.pii.documents import find_documents
from engram.memory.gate.pii.evasion import mixed_runs, spelled_emails
from engram.memory.gate.pii.findings import PiiFinding, PiiKind, Span, Text
from engram.memory.gate.pii.identifiers import find_cards, find_ibans, find_national_ids, find_ssns
from engram.memory.gate.pii.mrz import find_machine_readable
from engram.memory.gate.pii.pairs import find_pairs
from engram.memory.gate.pii.spoken import dictated_phone, spoken_runs_other
from engram.memory.gate.pii.travel import find_travel_records
from engram.memory.gate.pii.vendors import find_api_keys

__all__ = ["DETECTOR", "DETECTOR_VERSION", "PiiFinding", "PiiKind", "scan"]

DETECTOR = "regex"
"""Label of this detector in the ``engram_pii_flags_total`` metric."""

DETECTOR_VERSION = "regex@8"
"""Bumped whenever a rule changes what is flagged; recorded with quarantine decisions."""


# Overlapping spans: the higher priority survives (specific formats beat generic ones).
_PRIORITY: dict[PiiKind, int] = {
    PiiKind.PRIVATE_KEY: 100,
    PiiKind.JWT: 90,
    PiiKind.AWS_ACCESS_KEY_ID: 85,
    PiiKind.AWS_SECRET_ACCESS_KEY: 85,
    PiiKind.GITHUB_TOKEN: 85,
    PiiKind.SLACK_TOKEN: 85,
    PiiKind.STRIPE_KEY: 85,
    PiiKind.API_KEY: 85,
    PiiKind.URL_PASSWORD: 80,
    PiiKind.SECRET_ASSIGNMENT: 60,
    PiiKind.PAYMENT_CARD: 55,
    PiiKind.IBAN: 55,
    PiiKind.BANK_ACCOUNT: 48,
    PiiKind.US_SSN: 50,
    PiiKind.NATIONAL_ID: 45,
    PiiKind.EMAIL: 40,
    PiiKind.PHONE: 30,
}


_DETECTORS: tuple[Callable[[Text], Iterator[Span]], ...] = (
    find_private_keys,
    find_jwts,
    find_aws,
    find_github,
    find_slack,
    find_stripe,
    find_api_keys,
    find_crypto_secrets,
    find_url_passwords,
    find_assignments,
    find_code_secrets,
    find_pairs,
    find_cards,
    find_ibans,
    find_bank_accounts,
    find_ssns,
    find_national_ids,
    find_documents,
    find_machine_readable,
    find_travel_records,
    find_emails,
)


def _resolve(spans: list[Span]) -> list[PiiFinding]:
    """Drop spans that overlap a more specific (or, at equal priority, longer) one."""
    ranked = sorted(spans, key=lambda s: (-_PRIORITY[s[0]], s[1] - s[2], s[1]))
    kept: list[Span] = []  # disjoint, in text order
    starts: list[int] = []
    for kind, start, end in ranked:
        at = bisect.bisect_right(starts, start)
        if at > 0 and kept[at - 1][2] > start:
            continue  # overlaps the kept span before it
        if at < len(kept) and kept[at][1] < end:
            continue  # overlaps the kept span after it
        kept.insert(at, (kind, start, end))
        starts.insert(at, start)
    return [PiiFinding(kind, start, end) for kind, start, end in kept]


#: Runs of spoken or disguised digits read per text (past it, the next is a finding unread:
#: about 0.8 ms a run; a consolidated summary of ``max_topic`` sources with two runs each
#: stays readable), and the characters before one read with it.
MAX_SPOKEN_RUNS = 32
_SPOKEN_CONTEXT = 80

# Characters that make a value look different to a pattern and the same to a reader: Unicode
# dashes (made "-"), spaces (made " "), and what renders as nothing: format characters and the
# other default-ignorable code points (variation selectors, the grapheme joiner, tags, ...).
_DASHES = frozenset("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\u2e3a\u2e3b\ufe58\ufe63\uff0d")
_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u20e3"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)


# Marks a writer of Arabic or Hebrew adds or leaves out without changing the word: the short
# vowels and other harakat, the tatweel that draws a letter longer, Hebrew's points.
_OPTIONAL_MARKS = re.compile(
    "[\u0591-\u05bd\u05bf\u05c1\u05c2\u05c4\u05c5\u05c7\u0610-\u061a\u0640\u064b-\u065f\u0670]"
)


def _joins(char: str) -> bool:
    """Whether ``char`` changes the character before it rather than following it: a
    combining mark, or a Hangul vowel or final consonant written as a separate jamo."""
    return unicodedata.category(char)[0] == "M" or "\u1160" <= char <= "\u11ff"


def _fold(text: str) -> tuple[str, list[int], list[int]]:
    """``text`` as a pattern should read it (NFKC, so fullwidth digits and at signs are
    ASCII; digits of other scripts as ASCII digits; invisible characters dropped; Unicode
    dashes and spaces made ASCII; a letter written decomposed composed; a mark no letter
    takes dropped from an ASCII character, as a reader reads past it), and for each character
    of the result the index of the first character it came from and the index after the
    last."""
    out: list[str] = []
    origin: list[int] = []
    reach: list[int] = []
    for index, char in enumerate(text):
        if char.isascii():
            folded = char
        elif char in _DASHES:
            folded = "-"
        elif (
            _IGNORABLE.match(char)
            or _OPTIONAL_MARKS.match(char)
            or unicodedata.category(char) == "Cf"
        ):
            continue
        elif char.isspace():
            folded = " "
        elif (digit := unicodedata.decimal(char, None)) is not None:
            folded = str(digit)
        elif out and _joins(char):
            joined = unicodedata.normalize("NFKC", out[-1] + char)
            if len(joined) == 1 or out[-1].isascii():
                # "e" + U+0301 is "é"; "4" + U+0332 (underlined) is read as "4"
                out[-1] = joined if len(joined) == 1 else out[-1]
                reach[-1] = index + 1
                continue
            folded = unicodedata.normalize("NFKC", char)
        else:
            folded = unicodedata.normalize("NFKC", char)
        out.extend(folded)
        origin.extend([index] * len(folded))
        reach.extend([index + 1] * len(folded))
    return "".join(out), origin, reach


def scan(text: str) -> list[PiiFinding]:
    """Every PII or secret span in ``text``, sorted by start, overlaps resolved by specificity.

    Text with characters outside ASCII is read folded (:func:`_fold`: look-alike digits, at
    signs, spaces and hyphens made ASCII, invisible characters dropped); spans are given in
    ``text``."""
    if len(text) < 6:
        return []
    if text.isascii():
        return _scan(text)
    folded, origin, reach = _fold(text)
    return [
        PiiFinding(f.kind, origin[f.start], reach[f.end - 1])
        for f in _scan(folded)
        if f.end > f.start
    ]


def _scan(text: str) -> list[PiiFinding]:
    if len(text) < 6:
        return []
    read = unscanned(text)  # "222l 4257 …" read as digits, every place kept
    subject = Text.of(text)
    spans = _spans(subject if read is None else Text.of(read))
    spans.extend(find_obfuscated_emails(subject))
    spans.extend(spelled_emails(text))
    runs = itertools.chain(spoken_runs(text), spoken_runs_other(text), mixed_runs(text))
    seen: set[tuple[int, int, str]] = set()
    for start, end, digits in runs:
        if (start, end, digits) in seen:
            continue  # English number words are a spoken run and a mixed one: read once
        if len(seen) == MAX_SPOKEN_RUNS:
            # more said numbers than a memory holds: rather than skip what may hide behind
            # them, the next run is a finding unread (the fail-safe side, as for phones)
            spans.append((PiiKind.PHONE, start, end))
            break
        seen.add((start, end, digits))
        # the spoken digits, read with the words before them ("my cell is", "social is")
        context = text[max(0, start - _SPOKEN_CONTEXT) : start]
        spoken = Text.of(f"{context}{digits}")
        # what is found in the digits (a finding in the words before them is found there)
        kinds = {kind for kind, _, span_end in _spans(spoken) if span_end > len(context)}
        if not kinds and dictated_phone(context, digits):
            kinds = {PiiKind.PHONE}
        spans.extend((kind, start, end) for kind in kinds)
    return _resolve(spans)


def _spans(subject: Text) -> list[Span]:
    spans: list[Span] = []
    for detector in _DETECTORS:
        spans.extend(detector(subject))
    # Phones last: digit runs already claimed by a card, IBAN or id are not read again.
    spans.extend(find_phones(subject, list(spans)))
    return spans
