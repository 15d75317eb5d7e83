"""``api_key``: keys and tokens of services whose format names the vendor.

The kinds of :mod:`~engram.memory.gate.pii.credentials` cover AWS, GitHub, Slack and Stripe;
this module covers the other services agents are commonly given keys for, each by the prefix
and shape its vendor documents: OpenAI and Anthropic (``sk-…``), Google (``AIza…``,
``GOCSPX-…``, ``ya29.…``), GitLab (``glpat-…`` and its siblings), SendGrid (``SG.….…``),
Twilio API keys (``SK`` + 32 hex), npm, PyPI, Hugging Face, HashiCorp Vault, Azure storage
account keys and SAS signatures, Shopify, DigitalOcean, Mailgun, Mailchimp, Telegram bots,
Databricks, Atlassian, Docker Hub, Grafana, New Relic, Sentry, Supabase, Replicate, Groq,
Perplexity, xAI, Notion, Figma, Postman, Doppler, Pinecone, LangSmith, Linear, Netlify,
Braintree, Sentry DSN and Alibaba Cloud keys, Discord bot tokens, PostHog personal keys
(``phx_``; a project key ``phc_`` is public), Twitch stream keys, Riot Games keys, and the
EasyPost, Duffel and Shippo keys of shipping and travel integrations.

A prefix alone is not a key: the part after it must be long enough, must not be a
placeholder (``sk-xxxx``, ``<token>``), and must look random (entropy and, where the vendor
mixes them, both letters and digits). Documentation that names a format without a key
(``keys start with sk-``) matches nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from engram.memory.gate.pii.findings import PiiKind, Span, Text
from engram.memory.gate.pii.heuristics import entropy, is_placeholder

# Each alternative names its secret part ``body`` (what must look random); the prefixes are
# case-sensitive as their vendors issue them.
_VENDOR_KEYS = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:"
    r"sk-(?:ant-(?:api|admin)\d\d-|proj-|svcacct-|admin-|None-)?(?P<openai>[A-Za-z0-9_\-]{20,})"
    r"|AIza(?P<google>[0-9A-Za-z_\-]{35})"
    r"|GOCSPX-(?P<gsecret>[A-Za-z0-9_\-]{28})"
    r"|ya29\.(?P<goauth>[0-9A-Za-z_\-]{30,})"
    r"|gl(?:pat|dt|ptt|rt|soat|cbt|imt|ft|oas|agent)-(?P<gitlab>[0-9A-Za-z_\-]{20,})"
    r"|SG\.(?P<sendgrid>[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43})"
    r"|SK(?P<twilio>[0-9a-f]{32})"
    r"|npm_(?P<npm>[A-Za-z0-9]{36})"
    r"|pypi-(?P<pypi>AgE[A-Za-z0-9_\-]{50,})"
    r"|hf_(?P<hf>[A-Za-z0-9]{30,})"
    r"|hv[sb]\.(?P<vault>[A-Za-z0-9_\-]{24,})"
    r"|shp(?:at|ca|pa|ss)_(?P<shopify>[a-fA-F0-9]{32})"
    r"|do[opr]_v1_(?P<digitalocean>[a-f0-9]{64})"
    r"|key-(?P<mailgun>[0-9a-f]{32})"
    r"|(?P<mailchimp>[0-9a-f]{32})-us\d{1,2}"
    r"|\d{8,10}:(?P<telegram>AA[A-Za-z0-9_\-]{33})"
    r"|dapi(?P<databricks>[a-f0-9]{32})"
    r"|ATATT(?P<atlassian>[A-Za-z0-9_\-=]{100,})"
    r"|dckr_pat_(?P<docker>[A-Za-z0-9_\-]{27,})"
    r"|gl(?:c|sa)_(?P<grafana>[A-Za-z0-9_+/=]{32,})"
    r"|NRAK-(?P<newrelic>[A-Z0-9]{27})"
    r"|sntr[ysu]s?_(?P<sentry>[A-Za-z0-9_+/=]{40,})"
    r"|sbp_(?P<supabase>[a-f0-9]{40})"
    r"|r8_(?P<replicate>[A-Za-z0-9]{37})"
    r"|gsk_(?P<groq>[A-Za-z0-9]{48,})"
    r"|pplx-(?P<perplexity>[A-Za-z0-9]{40,})"
    r"|xai-(?P<xai>[A-Za-z0-9]{60,})"
    r"|(?:ntn_|secret_)(?P<notion>[A-Za-z0-9]{43,46})"
    r"|figd_(?P<figma>[A-Za-z0-9_\-]{40})"
    r"|PMAK-(?P<postman>[a-f0-9]{24}-[a-f0-9]{34})"
    r"|dp\.(?:pt|st|sa|ct)\.(?P<doppler>[A-Za-z0-9]{40,})"
    r"|pcsk_(?P<pinecone>[A-Za-z0-9_]{50,})"
    r"|lsv2_(?:pt|sk)_(?P<langsmith>[a-f0-9]{32}_[a-f0-9]{10})"
    r"|lin_api_(?P<linear>[A-Za-z0-9]{40})"
    r"|discord(?:app)?\.com/api/webhooks/\d{17,20}/(?P<discord>[\w\-]{60,80})"
    r"|nfp_(?P<netlify>[A-Za-z0-9]{36,40})"
    r"|LTAI(?P<alibaba>[A-Za-z0-9]{12,30})"
    r"|(?:SB-)?Mid-server-(?P<midtrans>[A-Za-z0-9_\-]{20,})"
    r"|access_token\$(?:production|sandbox)\$[a-z0-9]{16}\$(?P<braintree>[a-f0-9]{32})"
    r"|(?P<sentrydsn>[a-f0-9]{32})@(?:o\d+\.)?ingest\.(?:[a-z]{2}\.)?sentry\.io"
    r"|[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.(?P<discordbot>[A-Za-z0-9_\-]{27,40})"
    r"|phx_(?P<posthog>[A-Za-z0-9]{40,})"
    r"|live_\d{6,12}_(?P<twitch>[A-Za-z0-9]{20,40})"
    r"|RGAPI-(?P<riot>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    r"|EZ[AT]K(?P<easypost>[A-Za-z0-9]{54})"
    r"|duffel_(?:live|test)_(?P<duffel>[A-Za-z0-9_\-]{40,})"
    r"|shippo_(?:live|test)_(?P<shippo>[a-f0-9]{40})"
    r"|(?:prd|sbx):(?P<sumsub>[A-Za-z0-9]{24}\.[A-Za-z0-9]{32})"
    r"|organizations/[0-9a-f\-]{36}/apiKeys/(?P<cdp>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
    r")(?![A-Za-z0-9_\-])"
)
# Azure storage: an account key (88 base64 characters) after AccountKey= or in a key field,
# and the signature of a shared access signature.
_AZURE = re.compile(
    r"(?i:accountkey|sharedaccesskey)\s*=\s*(?P<body>[A-Za-z0-9+/]{42,}={0,2})"
    r"|[?&]sig=(?P<sig>[A-Za-z0-9%+/]{30,}={0,2})"
)
# Vendors whose keys are lower-case hex: no mixed case to ask for.
_HEX_BODIES = frozenset({"twilio", "shopify", "digitalocean", "mailgun", "mailchimp"})
_HEX_BODIES |= {"databricks", "supabase", "postman", "langsmith", "braintree", "sentrydsn"}
_HEX_BODIES |= {"riot", "shippo", "cdp"}
_PREFILTER = re.compile(
    r"sk-|AIza|GOCSPX-|ya29\.|gl[a-z]{1,5}[-_]|SG\.|SK[0-9a-f]|npm_|pypi-|hf_|hv[sb]\.|shp|do[opr]_"
    r"|key-|-us\d|:AA|dapi|ATATT|dckr_|NRAK-|sntr|sbp_|r8_|gsk_|pplx-|xai-|ntn_|secret_|figd_"
    r"|PMAK-|dp\.|pcsk_|lsv2_|lin_api_|discord|nfp_|access_token\$|sentry\.io|LTAI|Mid-server-"
    r"|[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6}\.|phx_|live_\d|RGAPI-|EZ[AT]K|duffel_"
    r"|shippo_|prd:|sbx:|/apiKeys/"
)


def _looks_random(body: str, *, hex_only: bool) -> bool:
    if is_placeholder(body) or len(set(body)) < 8:
        return False
    if hex_only:
        return entropy(body) >= 3.0
    letters = any(c.isalpha() for c in body)
    digits = any(c.isdigit() for c in body)
    mixed_case = any(c.islower() for c in body) and any(c.isupper() for c in body)
    return letters and (digits or mixed_case) and entropy(body) >= 3.5


def find_api_keys(t: Text) -> Iterator[Span]:
    text = t.raw
    if _PREFILTER.search(text):
        for m in _VENDOR_KEYS.finditer(text):
            vendor = m.lastgroup or ""
            if _looks_random(m.group(vendor), hex_only=vendor in _HEX_BODIES):
                yield PiiKind.API_KEY, m.start(), m.end()
    if "accountkey" in t.lower or "sharedaccesskey" in t.lower or "sig=" in text:
        for m in _AZURE.finditer(text):
            group = "body" if m.group("body") else "sig"
            if _looks_random(m.group(group), hex_only=False):
                yield PiiKind.API_KEY, m.start(group), m.end(group)
