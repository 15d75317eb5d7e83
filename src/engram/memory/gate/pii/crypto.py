"""Cryptocurrency secrets: wallet recovery phrases and private keys, exchange and node keys.

Whoever holds a wallet's recovery phrase or private key holds its funds, so each is a secret
(``secret_assignment``) wherever it is written, with or without a name before it:

- a recovery phrase (BIP-39): twelve or more words in a row from one language's BIP-39 word
  list (the ``mnemonic`` package's lists; English, Spanish, Portuguese, French, Italian,
  Czech and Turkish), accents optional. Ordinary prose does not do this: the lists hold no
  articles, pronouns or prepositions of three letters or fewer;
- an extended private key (``xprv``, ``tprv``, ``yprv``, ``zprv``, ... with its base58 body);
- a private key in wallet import format (base58, 51 or 52 characters), whose base58check
  checksum and version byte must hold;
- a raw key (64 hex digits, or a base58 keypair of 86 to 90 characters) named as a private
  or secret key (``privkey``, ``private key``, ``secret key``, ``importprivkey``, a JSON
  ``"pk"``).

A wallet's address, a public key (``xpub``) or a transaction hash is public and not reported.

Keys of exchanges and node providers have no format of their own, so they are known by the
vendor named beside them: a key or secret assigned to a name that names an exchange
(``BINANCE_API_SECRET=…``, ``kraken: { api_key: "…" }``, ``gateio: key … / secret …``), and the
key in a node provider's URL (Alchemy, Infura, QuickNode), are ``api_key``. A passphrase or
password beside them stays a ``secret_assignment``.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterator
from functools import cache

from mnemonic import Mnemonic

from engram.memory.gate.pii.findings import PiiKind, Span, Text
from engram.memory.gate.pii.heuristics import entropy, is_placeholder

#: Fewest words in a row that make a recovery phrase (BIP-39's shortest is twelve).
PHRASE_WORDS = 12
_LANGUAGES = ("english", "spanish", "portuguese", "french", "italian", "czech", "turkish")
# letters, and the combining accents of text written decomposed ("a" + U+0301)
_WORD = re.compile(r"(?:[^\W\d_]|[\u0300-\u036f])+")
_BASE58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_EXTENDED = re.compile(
    r"(?<![A-Za-z0-9])[xtyzuvYZUV]prv[1-9A-HJ-NP-Za-km-z]{100,112}(?![A-Za-z0-9])"
)
_WIF = re.compile(r"(?<![A-Za-z0-9])[5KLc9][1-9A-HJ-NP-Za-km-z]{50,51}(?![A-Za-z0-9])")
# Wallet import format: version 0x80 (mainnet) or 0xef (testnet), 32 key bytes, and 0x01
# when the public key is compressed.
_WIF_VERSIONS = frozenset({0x80, 0xEF})
# "pk" (a private key's field in wallet configs) only as a field given its value: as a word
# it is as often a table's primary key, beside a digest.
_RAW_KEY_NAME = re.compile(
    r"(?i)(?:priv(?:ate)?[ _\-]?key|secret[ _\-]?key|privkey|importprivkey"
    r"|[\"']pk[\"'][ \t]*:|\bpk[ \t]*[:=])"
)
_RAW_KEY = re.compile(
    r"(?<![A-Za-z0-9])(?:0x)?(?P<v>[0-9a-fA-F]{64}|[1-9A-HJ-NP-Za-km-z]{86,90})(?![A-Za-z0-9])"
)
_RAW_KEY_GAP = 40
_EXCHANGES = (
    "binance", "kucoin", "bybit", "okx", "okex", "gateio", "gate.io", "gate_io", "kraken",
    "coinbase", "cb_access", "bitfinex", "bitstamp", "huobi", "htx", "mexc", "bitget",
    "deribit", "bitmex", "gemini", "bithumb", "upbit", "bitso", "luno", "valr", "btcturk",
    "paribu", "mercadobitcoin", "bitvavo", "kraken_futures",
)  # fmt: skip
_EXCHANGE = re.compile(r"(?<![a-z0-9])(?:" + "|".join(map(re.escape, _EXCHANGES)) + r")")
# A key or secret after the exchange's name on the same line: "KEY=…", "api_key: \"…\"",
# "key …" (separated by a space only when the value looks random).
_VENDOR_FIELD = re.compile(
    r"(?i)(?<![A-Za-z0-9])(?P<name>[\w.\-]{0,30}?(?:key|secret)[\w\-]{0,12})[\"']?"
    r"(?:[ \t]{0,3}(?P<sep>[:=])[ \t]{0,3}|[ \t]+)[\"']?(?P<v>[A-Za-z0-9+/=_\-]{16,128})"
)
_VENDOR_WINDOW = 240
_DIGIT = re.compile(r"\d")
_LETTER = re.compile(r"[A-Za-z]")
_NODE_URL = re.compile(
    r"(?:alchemy\.com/v2/|infura\.io/v3/|quiknode\.pro/|alchemyapi\.io/v2/)"
    r"(?P<v>[A-Za-z0-9_\-]{24,64})(?![A-Za-z0-9_\-])"
)
_PREFILTER = ("prv", "pk", "priv", "secret", "alchemy", "infura", "quiknode")


def _plain(word: str) -> str:
    """``word`` lower-cased without its accents ("débil" -> "debil")."""
    if word.isascii():
        return word.lower()
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(c for c in decomposed if not unicodedata.combining(c))


@cache
def _word_lists() -> tuple[frozenset[str], ...]:
    """Each language's BIP-39 word list, accents removed."""
    return tuple(
        frozenset(_plain(word) for word in Mnemonic(language).wordlist) for language in _LANGUAGES
    )


@cache
def _any_list() -> frozenset[str]:
    """The words of every list: a text with no run of them long enough is read no further."""
    return frozenset().union(*_word_lists())


def _longest_run(plain: list[str], words: frozenset[str]) -> int:
    longest = current = 0
    for word in plain:
        current = current + 1 if word in words else 0
        longest = max(longest, current)
    return longest


def _base58check(value: str) -> bytes | None:
    """The payload of a base58check string, or None when its checksum fails."""
    number = 0
    for char in value:
        number = number * 58 + _BASE58.index(char)
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    raw = b"\0" * (len(value) - len(value.lstrip("1"))) + raw
    if len(raw) < 5:
        return None
    body, checksum = raw[:-4], raw[-4:]
    return body if hashlib.sha256(hashlib.sha256(body).digest()).digest()[:4] == checksum else None


def _wif(value: str) -> bool:
    body = _base58check(value)
    if body is None or body[0] not in _WIF_VERSIONS:
        return False
    return len(body) == 33 or (len(body) == 34 and body[-1] == 1)


def _phrases(text: str) -> Iterator[Span]:
    """Runs of ``PHRASE_WORDS`` or more words of one BIP-39 list, apart by spaces only."""
    words = list(_WORD.finditer(text))
    if len(words) < PHRASE_WORDS:
        return
    plain = [_plain(m.group(0)) for m in words]
    if _longest_run(plain, _any_list()) < PHRASE_WORDS:
        return
    for wordlist in _word_lists():
        start = 0
        while start < len(words):
            end = start
            while end < len(words) and plain[end] in wordlist:
                if end > start and text[words[end - 1].end() : words[end].start()].strip():
                    break  # a comma or another mark between two words: a list, not a phrase
                end += 1
            if end - start >= PHRASE_WORDS:
                yield PiiKind.SECRET_ASSIGNMENT, words[start].start(), words[end - 1].end()
            start = max(end, start + 1)


def _random(value: str) -> bool:
    return not is_placeholder(value) and len(set(value)) >= 8 and entropy(value) >= 3.0


def _vendor_windows(t: Text) -> Iterator[tuple[int, int]]:
    """Where a key may follow an exchange's name: from the name to the end of its line, at
    most ``_VENDOR_WINDOW`` characters on. Windows that overlap are read as one: names close
    together ("okx-okx-...") would otherwise read the same characters again for each name
    (the largest record: half a second; hostile pass P)."""
    start = stop = -1
    for vendor in _EXCHANGE.finditer(t.lower):
        line_end = t.raw.find("\n", vendor.end())
        end = min(vendor.end() + _VENDOR_WINDOW, len(t.raw) if line_end < 0 else line_end)
        if vendor.start() < stop:
            stop = max(stop, end)
            continue
        if start >= 0:
            yield start, stop
        start, stop = vendor.start(), end
    if start >= 0:
        yield start, stop


def _exchange_keys(t: Text) -> Iterator[Span]:
    """Keys and secrets assigned after an exchange's name (see the module)."""
    for start, stop in _vendor_windows(t):
        for m in _VENDOR_FIELD.finditer(t.raw, start, stop):
            name, value = m.group("name").lower(), m.group("v")
            if "pass" in name or not _random(value):
                continue
            if m.group("sep") is None and not (_DIGIT.search(value) and _LETTER.search(value)):
                continue  # "key" and a word after it, with no sign between: a random token only
            yield PiiKind.API_KEY, m.start("v"), m.end("v")


def find_crypto_secrets(t: Text) -> Iterator[Span]:
    text, lower = t.raw, t.lower
    yield from _phrases(text)
    if _EXCHANGE.search(lower):
        yield from _exchange_keys(t)
    if not any(word in lower for word in _PREFILTER) and not _WIF.search(text):
        return
    for m in _EXTENDED.finditer(text):
        yield PiiKind.SECRET_ASSIGNMENT, m.start(), m.end()
    for m in _WIF.finditer(text):
        if _wif(m.group(0)):
            yield PiiKind.SECRET_ASSIGNMENT, m.start(), m.end()
    for name in _RAW_KEY_NAME.finditer(text):
        key = _RAW_KEY.search(text, name.end(), name.end() + _RAW_KEY_GAP + 90)
        if key is not None and key.start() - name.end() <= _RAW_KEY_GAP and _random(key["v"]):
            yield PiiKind.SECRET_ASSIGNMENT, key.start("v"), key.end("v")
    for m in _NODE_URL.finditer(text):
        if _random(m.group("v")):
            yield PiiKind.API_KEY, m.start("v"), m.end("v")
