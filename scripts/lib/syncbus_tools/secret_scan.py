"""Secret-leak scanner for whole-system runs.

After a run, no secret may be left in a log file, a message still in the broker's queues, or a
metrics page. A secret is found in every form it takes on the way: each secret (a kubeconfig
bearer token, a kubeconfig client private key in PEM, a TLS client key, the broker password)
is turned into *needles*, the byte strings it becomes when it is printed raw, base64- or
base64url-encoded (also as part of a larger encoded blob, such as a Kubernetes Secret's `data`
holding a whole kubeconfig, and encoded twice, as a kubeconfig's client-key-data is in such a
Secret), hex-encoded, percent-encoded or JSON-escaped; a PEM key also by its base64 body, each
of its body lines (so a key re-wrapped or printed as a JSON string is still found) and its DER
bytes in binary and encoded. Every needle is searched in every source: files (Scanner), the
messages in the broker's queues (broker_messages, through the management API, without
consuming them) and pages such as metrics endpoints (fetch_page).

A finding names the secret, the form that matched and where; its excerpt masks every needle
and the encoded run around it, and every line this module prints goes through the same
masking, so a report never shows a secret.

    PYTHONPATH=scripts/lib python3 -m syncbus_tools.secret_scan --secrets secrets.json --dir run/ \\
        --url http://127.0.0.1:15692/metrics --broker-env run/rabbitmq/cluster.env

secrets.json is {"name": "value", ...}; a key's value is its PEM text. Exit 0 when nothing was
found, 1 when a secret was found, 2 on usage errors and when a source could not be read (a scan
with a hole proves nothing).
"""

import argparse
import base64
import binascii
import bisect
import dataclasses
import fnmatch
import glob
import gzip
import http.client
import json
import os
import re
import sys
import urllib.error
import urllib.parse
import urllib.request

MIN_NEEDLE = 12           # shorter strings occur by chance: too weak to search
PEM_MIN_LINE = 16         # a PEM body line shorter than this (the last one) is no needle
CHUNK_SIZE = 8 << 20      # files are read in chunks of this size, overlapping by a needle
CONTEXT = 40              # bytes of context on each side of a finding's excerpt
STATS_SLACK = 100         # extra messages asked of a queue: its statistics lag behind
DEFAULT_TRUNCATE = 50000  # payload bytes the management API returns per message
DEFAULT_LIMIT = 20        # findings printed per source
RUN_LIMIT = 1 << 16       # bytes of an encoded run after a finding that merge into it
GRAM = 8                  # needles of LONG_NEEDLE bytes or more are found through GRAM-byte
LONG_NEEDLE = 32          # pieces of the buffer, taken every LONG_NEEDLE - GRAM + 1 bytes

_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]*PRIVATE KEY)-----(.*?)-----END \1-----", re.S)
_PEM_LINE = re.compile(r"[A-Za-z0-9+/=]+")
_URLSAFE = bytes.maketrans(b"+/", b"-_")

# How far a finding's mask extends beyond the needle, forwards and (on the reversed bytes)
# backwards: over the rest of the encoded run the needle sits in, so neither the edge characters
# of a shifted base64 needle nor the neighbouring lines of a key's body are shown.
_EXTENSIONS = {
    "base64": (re.compile(rb"[A-Za-z0-9+/]*=*"), re.compile(rb"[A-Za-z0-9+/]*")),
    "base64url": (re.compile(rb"[A-Za-z0-9_-]*=*"), re.compile(rb"[A-Za-z0-9_-]*")),
    "pem": (re.compile(rb"(?:\\+[nr]|[A-Za-z0-9+/=\s])*"), re.compile(rb"(?:[nr]\\+|[A-Za-z0-9+/=\s])*")),
}


class SecretScanError(Exception):
    """A secret, source or argument the scan cannot use: printed as one line, exit 2."""


@dataclasses.dataclass(frozen=True)
class Secret:
    """A named secret value; surrounding whitespace is not part of it."""
    name: str
    value: str


@dataclasses.dataclass(frozen=True)
class Needle:
    """One form of a secret: `form` names the encoding, `extend` the run its mask covers."""
    secret: str
    form: str
    data: bytes
    extend: str | None = None


@dataclasses.dataclass(frozen=True)
class Finding:
    """A needle found in a source, at a 1-based line and a 0-based byte offset."""
    secret: str
    form: str
    source: str
    line: int
    offset: int
    excerpt: str

    @property
    def location(self):
        """Where it is, for a report: source:line (byte offset)."""
        return f"{self.source}:{self.line} (byte {self.offset})"


# ---------------------------------------------------------------------------------------------
# Needles


def derive_needles(secret):
    """Every needle of a secret, without duplicates; SecretScanError for a weak secret. Every
    secret also gets the base64 of its own base64 encoding: a kubeconfig holds a key's PEM
    encoded once (client-key-data), a Secret's data holds that kubeconfig encoded again."""
    value = secret.value.strip()
    if not secret.name:
        raise SecretScanError("a secret needs a name")
    if len(value) < MIN_NEEDLE:
        raise SecretScanError(f"secret {secret.name!r} is {len(value)} characters long: at least "
                              f"{MIN_NEEDLE} are needed to search for it without false findings")
    raw = value.encode("utf-8")
    forms = [("raw", raw, None)]
    if "PRIVATE KEY-----" in value:
        forms += _pem_forms(secret.name, value)
    forms += _binary_forms("", raw)
    forms += _text_forms(value)
    inner = _base64_inner(raw, 0, False)
    forms += [(f"base64-of-base64@{offset}", _base64_inner(inner, offset, False), "base64")
              for offset in range(3)]
    needles = {}
    for form, data, extend in forms:
        if data not in needles:
            needles[data] = _needle(secret.name, form, data, extend)
    return list(needles.values())


def _needle(name, form, data, extend):
    """A needle, refused when it is too short to search."""
    if len(data) < MIN_NEEDLE:
        raise SecretScanError(f"secret {name!r}: its {form} form is {len(data)} characters long, "
                              f"under the {MIN_NEEDLE} needed to search without false findings")
    return Needle(name, form, data, extend)


def _base64_inner(data, offset, urlsafe):
    """The characters of data's base64 encoding that do not depend on its neighbours when data
    starts `offset` bytes (0, 1 or 2) into a 3-byte group of a larger encoded blob."""
    encoded = base64.b64encode(bytes(offset) + data)
    first = -(-8 * offset // 6)
    last = 8 * (offset + len(data)) // 6
    inner = encoded[first:last]
    return inner.translate(_URLSAFE) if urlsafe else inner


def _binary_forms(prefix, data):
    """(form, needle, extend) of bytes: base64 and base64url at the three alignments, and hex."""
    forms = []
    for alphabet, urlsafe in (("base64", False), ("base64url", True)):
        name = f"{prefix}-{alphabet}" if prefix else alphabet
        for offset in range(3):
            forms.append((f"{name}@{offset}", _base64_inner(data, offset, urlsafe), alphabet))
    forms.append((f"{prefix}-hex" if prefix else "hex", data.hex().encode("ascii"), None))
    return forms


def _text_forms(value):
    """(form, needle, extend) of a text: percent-encoded (as in URLs and form bodies) and
    JSON-escaped (as json.dumps writes it, with or without non-ASCII escapes and with `\\/`)."""
    percent = urllib.parse.quote(value, safe="")
    forms = [("percent", percent),
             ("percent-lowercase", re.sub(r"%[0-9A-F]{2}", lambda m: m.group().lower(), percent)),
             ("form-urlencoded", urllib.parse.quote_plus(value, safe=""))]
    for form, ascii_only in (("json", True), ("json-utf8", False)):
        escaped = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
        forms += [(form, escaped), (form + "-slash", escaped.replace("/", "\\/"))]
    return [(form, text.encode("utf-8"), None) for form, text in forms]


def _pem_forms(name, value):
    """(form, needle, extend) of the private keys in a PEM text: each body without line breaks,
    each body line of PEM_MIN_LINE characters or more, the DER bytes (a key stored or sent in
    binary) and their binary forms."""
    blocks = _PEM_BLOCK.findall(value)
    if not blocks:
        raise SecretScanError(f"secret {name!r} mentions a PRIVATE KEY but holds no complete "
                              "-----BEGIN/-----END block")
    forms = []
    for number, (_, body) in enumerate(blocks, 1):
        prefix = "pem" if len(blocks) == 1 else f"pem{number}"
        lines = [line.strip() for line in body.splitlines()]
        lines = [line for line in lines if line and ":" not in line]   # no Proc-Type headers
        if not all(_PEM_LINE.fullmatch(line) for line in lines):
            raise SecretScanError(f"secret {name!r}: the body of its private key is not base64")
        joined = "".join(lines)
        try:
            der = base64.b64decode(joined, validate=True)
        except binascii.Error as e:
            raise SecretScanError(f"secret {name!r}: the body of its private key is not base64 "
                                  f"({e})") from None
        forms.append((f"{prefix}-body", joined.encode("ascii"), "pem"))
        forms += [(f"{prefix}-line-{i}", line.encode("ascii"), "pem")
                  for i, line in enumerate(lines, 1) if len(line) >= PEM_MIN_LINE]
        forms.append((f"{prefix}-der", der, None))
        forms += _binary_forms(f"{prefix}-der", der)
    return forms


def load_secrets(path):
    """The secrets of a JSON file {"name": "value", ...}."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        raise SecretScanError(f"cannot read the secrets file {path}: {e}") from None
    if not isinstance(data, dict) or not data:
        raise SecretScanError(f"{path}: expected a non-empty JSON object {{\"name\": \"value\", ...}}")
    bad = sorted(name for name, value in data.items() if not isinstance(value, str))
    if bad:
        raise SecretScanError(f"{path}: the value of {', '.join(bad)} is not a string")
    return [Secret(name, value) for name, value in data.items()]


# ---------------------------------------------------------------------------------------------
# Scanning


class Scanner:
    """Searches sources for the needles of a set of secrets, counting what it scanned. A file is
    read in chunks of chunk_size bytes, each searched together with the end of the previous one,
    so a needle across a chunk boundary is found too, and only once."""

    def __init__(self, secrets, chunk_size=CHUNK_SIZE):
        names = [secret.name for secret in secrets]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise SecretScanError(f"secret name(s) given twice: {', '.join(repeated)}")
        if not secrets:
            raise SecretScanError("no secrets to search for")
        self.needles = [needle for secret in secrets for needle in derive_needles(secret)]
        self.needles.sort(key=lambda needle: len(needle.data), reverse=True)
        self.overlap = len(self.needles[0].data) - 1
        if chunk_size <= self.overlap:
            raise SecretScanError(f"chunk size {chunk_size} is not larger than the longest "
                                  f"needle ({self.overlap + 1} bytes)")
        self.chunk_size = chunk_size
        self._short = [needle for needle in self.needles if len(needle.data) < LONG_NEEDLE]
        self._grams = _gram_index(needle for needle in self.needles
                                  if len(needle.data) >= LONG_NEEDLE)
        self.sources = 0
        self.bytes_scanned = 0
        self.errors = []

    def scan_text(self, label, text):
        """Findings in a text (a str; lone surrogates stand for undecodable bytes)."""
        data = text.encode("utf-8", "surrogateescape")
        self.sources += 1
        self.bytes_scanned += len(data)
        return self._scan_buffer(data, label, 0, 0, 0)

    def scan_file(self, path):
        """Findings in a file of any content, gzip-compressed ones decompressed."""
        try:
            with open(path, "rb") as f:
                compressed = f.read(2) == b"\x1f\x8b"
                f.seek(0)
                if compressed:
                    with gzip.GzipFile(fileobj=f) as stream:
                        return self._scan_stream(stream, path)
                return self._scan_stream(f, path)
        except (OSError, EOFError) as e:
            raise SecretScanError(f"cannot read {path}: {e}") from None

    def scan_tree(self, directory, exclude=()):
        """Findings in every regular file under directory, except those whose path relative to
        it, name or absolute path matches a glob of exclude. Unreadable files go to errors."""
        if not os.path.isdir(directory):
            raise SecretScanError(f"{directory}: not a directory")
        findings = []
        for root, dirs, files in os.walk(directory):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(root, name)
                if _excluded(path, os.path.relpath(path, directory), exclude):
                    continue
                if not os.path.isfile(path):
                    continue   # sockets, pipes, dangling links
                try:
                    findings += self.scan_file(path)
                except SecretScanError as e:
                    self.errors.append(str(e))
        return findings

    def redact(self, text):
        """text with every needle replaced by <<secret name>>: the last guard of every report."""
        for needle in self.needles:
            value = needle.data.decode("utf-8", "surrogateescape")
            if value in text:
                text = text.replace(value, f"<<{needle.secret}>>")
        return text

    def _scan_stream(self, stream, source):
        """Findings in a binary stream, read chunk by chunk."""
        findings, tail, offset, lines = [], b"", 0, 0
        self.sources += 1
        while chunk := stream.read(self.chunk_size):
            self.bytes_scanned += len(chunk)
            buffer = tail + chunk
            findings += self._scan_buffer(buffer, source, offset, lines, len(tail))
            keep = min(self.overlap, len(buffer))
            lines += buffer.count(b"\n", 0, len(buffer) - keep)
            offset += len(buffer) - keep
            tail = buffer[len(buffer) - keep:]
        return findings

    def _scan_buffer(self, buffer, source, offset, lines, seen):
        """Findings in buffer, which starts at byte `offset` after `lines` line breaks of the
        source; matches ending within its first `seen` bytes were reported before."""
        matches = sorted(self._matches(buffer), key=lambda m: (m[0], -m[1]))
        starts = [start for start, _, _ in matches]
        findings, line, counted = [], lines + 1, 0
        for start, end, needle in _outermost(buffer, matches):
            if end <= seen:
                continue
            line += buffer.count(b"\n", counted, start)
            counted = start
            left, right = _window(buffer, start, end)
            nearby = matches[bisect.bisect_left(starts, left - self.overlap):
                             bisect.bisect_left(starts, right)]
            findings.append(Finding(needle.secret, needle.form, source, line, offset + start,
                                    _excerpt(buffer, left, right, nearby, needle.secret)))
        return findings

    def _matches(self, buffer):
        """(start, end, needle) of every occurrence of every needle in buffer. Short needles are
        searched one by one; long ones through GRAM-byte pieces: each piece of the buffer taken
        every `step` bytes that is an indexed piece of a needle (see _gram_index) is searched
        for everywhere in the buffer, and at each place the needles it belongs to are checked.
        The cost hardly grows with the number of needles."""
        found = set()
        for needle in self._short:
            start = buffer.find(needle.data)
            while start != -1:
                found.add((start, needle))
                start = buffer.find(needle.data, start + 1)
        step = LONG_NEEDLE - GRAM + 1
        sampled = {buffer[at:at + GRAM] for at in range(0, len(buffer) - GRAM + 1, step)}
        for gram in sampled.intersection(self._grams):
            at = buffer.find(gram)
            while at != -1:
                for needle, position in self._grams[gram]:
                    if at >= position and buffer.startswith(needle.data, at - position):
                        found.add((at - position, needle))
                at = buffer.find(gram, at + 1)
        return [(start, start + len(needle.data), needle) for start, needle in found]


def _gram_index(needles):
    """{gram: [(needle, position)]} of LONG_NEEDLE - GRAM + 1 consecutive grams of each needle,
    from the middle (away from shared headers such as -----BEGIN). Any occurrence of a needle
    then holds all of them, at consecutive positions, so one starts at a sampled position."""
    index = {}
    step = LONG_NEEDLE - GRAM + 1
    for needle in needles:
        first = (len(needle.data) - LONG_NEEDLE) // 2
        for position in range(first, first + step):
            index.setdefault(needle.data[position:position + GRAM], []).append((needle, position))
    return index


def _excluded(path, relative, patterns):
    """Whether a file matches one of the exclude globs."""
    candidates = (relative, os.path.basename(path), os.path.abspath(path))
    return any(fnmatch.fnmatch(candidate, pattern) for pattern in patterns for candidate in candidates)


def _outermost(buffer, matches):
    """The matches, sorted by start then longest first, that do not start within an earlier
    match of the same secret or the encoded run it is part of (up to RUN_LIMIT bytes on): one
    leak, one finding (a key's body lines, in one body re-wrapped or written as a JSON string,
    are one finding)."""
    kept, reach = [], {}
    for start, end, needle in matches:
        if start < reach.get(needle.secret, -1):
            continue
        kept.append((start, end, needle))
        if needle.extend:
            end = _EXTENSIONS[needle.extend][0].match(buffer, end, end + RUN_LIMIT).end()
        reach[needle.secret] = end
    return kept


def _window(buffer, start, end):
    """[left, right) of a finding's excerpt: its line, at most CONTEXT bytes each side."""
    left = max(buffer.rfind(b"\n", 0, start) + 1, start - CONTEXT)
    line_end = buffer.find(b"\n", end)
    right = min(len(buffer) if line_end == -1 else line_end, end + CONTEXT)
    return left, right


def _excerpt(buffer, left, right, matches, secret):
    """buffer[left:right] as text, every needle in view masked with the encoded run it is part
    of, unprintable characters shown as '.'. Overlapping masks are one, named after the
    finding's secret when it is among theirs."""
    pieces, position = ["..." if left > 0 and buffer[left - 1:left] != b"\n" else ""], left
    for mask_start, mask_end, names in _merge_masks(
            _mask(buffer, start, end, needle, left, right)
            for start, end, needle in matches if start < right and end > left):
        pieces.append(_printable(buffer[position:mask_start]))
        pieces.append(f"<<{secret if secret in names else names[0]}>>")
        position = mask_end
    pieces.append(_printable(buffer[position:right]))
    pieces.append("..." if right < len(buffer) and buffer[right:right + 1] != b"\n" else "")
    return "".join(pieces)


def _merge_masks(masks):
    """[start, end, [secret names]] of the union of (start, end, secret) masks, by position."""
    merged = []
    for start, end, name in sorted(masks):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
            merged[-1][2].append(name)
        else:
            merged.append([start, end, [name]])
    return merged


def _mask(buffer, start, end, needle, left, right):
    """(start, end, secret) of a needle's mask within [left, right), widened over its run."""
    if needle.extend:
        forwards, backwards = _EXTENSIONS[needle.extend]
        if end < right:
            end = forwards.match(buffer, end, right).end()
        if start > left:
            start -= backwards.match(buffer[left:start][::-1]).end()
    return max(start, left), min(end, right), needle.secret


def _printable(data):
    """Bytes as text for a report line."""
    return "".join(c if c.isprintable() else "." for c in data.decode("utf-8", "replace"))


# ---------------------------------------------------------------------------------------------
# Sources behind HTTP


@dataclasses.dataclass
class BrokerContents:
    """What broker_messages read: (label, text) of every message part, the queues read, the
    messages read, what it could not read and why, and payloads cut at the truncate size."""
    texts: list
    queues: list
    messages: int
    skipped: list
    truncated: int


def broker_messages(mgmt_url, user, password, vhost="/", truncate=DEFAULT_TRUNCATE, timeout=60):
    """Every ready message of the vhost's classic and quorum queues, read through the management
    API without consuming it (ack_requeue_true: the broker requeues what it handed out). Every
    queue is asked, statistics saying empty or not, for the messages its statistics count plus
    STATS_SLACK, since they lag by up to a collection interval and the broker stops at the first
    empty get. A payload the API returns in base64 (not UTF-8) is decoded. Stream queues cannot
    be read this way and messages held unacknowledged by consumers cannot be read at all: both
    are reported in skipped. On a quorum queue with x-delivery-limit, each read counts as one
    delivery of every message read: read after the run, once."""
    base = mgmt_url.rstrip("/")
    auth = "Basic " + base64.b64encode(f"{user}:{password}".encode("utf-8")).decode("ascii")
    quoted_vhost = urllib.parse.quote(vhost, safe="")
    queues = _mgmt_call(f"{base}/api/queues/{quoted_vhost}", auth, None, timeout)
    if queues is None:
        raise SecretScanError(f"{base}: no virtual host {vhost!r}")
    contents = BrokerContents([], [], 0, [], 0)
    for queue in sorted(queues, key=lambda q: q["name"]):
        name = queue["name"]
        kind = queue.get("type") or (queue.get("arguments") or {}).get("x-queue-type", "classic")
        if kind == "stream":
            contents.skipped.append(f"{name}: a stream (read it with a stream consumer)")
            continue
        count = max(queue.get("messages") or 0, queue.get("messages_ready") or 0) + STATS_SLACK
        request = {"count": count, "ackmode": "ack_requeue_true", "encoding": "auto",
                   "truncate": truncate}
        url = f"{base}/api/queues/{quoted_vhost}/{urllib.parse.quote(name, safe='')}/get"
        messages = _mgmt_call(url, auth, request, timeout)
        if messages is None:
            contents.skipped.append(f"{name}: deleted while the queues were read")
            continue
        contents.queues.append(name)
        for number, message in enumerate(messages, 1):
            _add_message(contents, f"queue {name} message {number}", message)
        unacked = queue.get("messages_unacknowledged") or 0
        if unacked:
            contents.skipped.append(f"{name}: {unacked} message(s) held unacknowledged by "
                                    "consumers, which the management API cannot read")
    return contents


def _add_message(contents, label, message):
    """The payload and the properties (headers included) of one message from the API."""
    payload = message.get("payload", "")
    if message.get("payload_encoding") == "base64":
        payload = base64.b64decode(payload).decode("utf-8", "surrogateescape")
    if message.get("payload_bytes", 0) > len(payload.encode("utf-8", "surrogateescape")):
        contents.truncated += 1
    envelope = {key: message.get(key) for key in ("exchange", "routing_key", "properties")}
    contents.texts.append((f"{label} payload", payload))
    contents.texts.append((f"{label} properties",
                           json.dumps(envelope, ensure_ascii=False, sort_keys=True)))
    contents.messages += 1


def _mgmt_call(url, auth, body, timeout):
    """The JSON answer of a management API GET (body None) or POST; None for 404."""
    data = None if body is None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(url, data=data, method="GET" if body is None else "POST")
    request.add_header("Authorization", auth)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as e:
        if e.code == 404:
            return None
        raise SecretScanError(f"{request.get_method()} {url}: HTTP {e.code} {e.reason}") from None
    except (OSError, http.client.HTTPException, ValueError) as e:
        raise SecretScanError(f"{request.get_method()} {url}: {e}") from None


def fetch_page(url, timeout=30):
    """The body of a page (a metrics endpoint) as text."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.read().decode("utf-8", "surrogateescape")
    except (OSError, http.client.HTTPException) as e:
        raise SecretScanError(f"GET {url}: {e}") from None


def read_env_file(path):
    """KEY=VALUE lines as a dict: scripts/rabbitmq-node's broker.env, or scripts/rabbitmq-cluster's
    cluster.env, where a value with blanks is in double quotes (the file is also shell)."""
    values = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#") and "=" in line:
                    key, value = line.split("=", 1)
                    if len(value) >= 2 and value[0] == value[-1] == '"':
                        value = value[1:-1]
                    values[key] = value
    except OSError as e:
        raise SecretScanError(f"cannot read {path}: {e}") from None
    return values


def broker_settings(path):
    """(management URLs, user, password) of a broker's env file: SYNCBUS_MGMT_URLS (a cluster's,
    one URL per node, separated by blanks or commas) or SYNCBUS_MGMT_URL (a single node's),
    SYNCBUS_BROKER_USER and SYNCBUS_BROKER_PASSWORD."""
    env = read_env_file(path)
    urls = re.split(r"[,\s]+", env.get("SYNCBUS_MGMT_URLS") or env.get("SYNCBUS_MGMT_URL", ""))
    urls = [url for url in urls if url]
    missing = [key for key, present in (("SYNCBUS_MGMT_URLS or SYNCBUS_MGMT_URL", urls),
                                        ("SYNCBUS_BROKER_USER", "SYNCBUS_BROKER_USER" in env),
                                        ("SYNCBUS_BROKER_PASSWORD", "SYNCBUS_BROKER_PASSWORD" in env))
               if not present]
    if missing:
        raise SecretScanError(f"{path}: no {', '.join(missing)}")
    return urls, env["SYNCBUS_BROKER_USER"], env["SYNCBUS_BROKER_PASSWORD"]


def read_broker(urls, user, password, vhost):
    """broker_messages from the first node of a cluster that answers (any node serves every
    queue of the cluster); SecretScanError naming every failure when none does."""
    failures = []
    for url in urls:
        try:
            return url, broker_messages(url, user, password, vhost)
        except SecretScanError as e:
            failures.append(str(e))
    raise SecretScanError("no management API answered: " + "; ".join(failures))


# ---------------------------------------------------------------------------------------------
# Command line


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="python3 -m syncbus_tools.secret_scan",
        description="Search logs, the broker's queued messages and metrics pages for secrets.")
    parser.add_argument("--secrets", required=True, metavar="FILE",
                        help='JSON {"name": "value", ...}; a private key\'s value is its PEM text')
    parser.add_argument("--dir", action="append", default=[], metavar="D",
                        help="scan every file under D (repeatable)")
    parser.add_argument("--file", action="append", default=[], metavar="F",
                        help="scan the file F (repeatable)")
    parser.add_argument("--url", action="append", default=[], metavar="URL",
                        help="scan the page at URL, e.g. a metrics endpoint (repeatable)")
    parser.add_argument("--broker-env", metavar="FILE",
                        help="scan the broker's queued messages; FILE (cluster.env or broker.env) "
                             "holds SYNCBUS_MGMT_URLS or SYNCBUS_MGMT_URL, SYNCBUS_BROKER_USER, "
                             "SYNCBUS_BROKER_PASSWORD")
    parser.add_argument("--vhost", default="/", help="the broker's virtual host (default /)")
    parser.add_argument("--exclude", action="append", default=[], metavar="GLOB",
                        help="skip files under --dir whose relative path, name or absolute path "
                             "matches GLOB (repeatable); the secrets file is always skipped")
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT, metavar="N",
                        help=f"print at most N findings per source, 0 for all (default {DEFAULT_LIMIT})")
    args = parser.parse_args(argv)
    if not (args.dir or args.file or args.url or args.broker_env):
        parser.error("nothing to scan: give --dir, --file, --url or --broker-env")
    if args.limit < 0:
        parser.error("--limit must be 0 or more")
    return args


def scan_sources(scanner, args):
    """(findings, summary lines) of every source the arguments name; failures to read a source
    go to scanner.errors."""
    findings, summary = [], []
    exclude = args.exclude + [glob.escape(os.path.abspath(args.secrets))]
    files = pages = 0
    for directory in args.dir:
        before = scanner.sources
        try:
            findings += scanner.scan_tree(directory, exclude)
        except SecretScanError as e:
            scanner.errors.append(str(e))
        files += scanner.sources - before
    for path in args.file:
        try:
            findings += scanner.scan_file(path)
            files += 1
        except SecretScanError as e:
            scanner.errors.append(str(e))
    for url in args.url:
        try:
            findings += scanner.scan_text(url, fetch_page(url))
            pages += 1
        except SecretScanError as e:
            scanner.errors.append(str(e))
    summary.append(f"scanned {files} file(s), {pages} page(s)")
    if args.broker_env:
        try:
            url, contents = read_broker(*broker_settings(args.broker_env), args.vhost)
            for label, text in contents.texts:
                findings += scanner.scan_text(label, text)
            summary.append(f"scanned {contents.messages} broker message(s) in "
                           f"{len(contents.queues)} queue(s) of vhost {args.vhost} via {url}")
            summary += [f"skipped {reason}" for reason in contents.skipped]
            if contents.truncated:
                summary.append(f"{contents.truncated} message payload(s) were cut at "
                               f"{DEFAULT_TRUNCATE} bytes: their rest was not scanned")
        except SecretScanError as e:
            scanner.errors.append(str(e))
    summary.append(f"{scanner.sources} source(s), {scanner.bytes_scanned} bytes")
    return findings, summary


def report(scanner, findings, summary, limit):
    """The report's lines: summary, errors, then the findings, at most `limit` per source."""
    lines = [f"secret-scan: {line}" for line in summary]
    lines += [f"secret-scan: ERROR {error}" for error in scanner.errors]
    lines.append(f"secret-scan: {len(findings)} finding(s)")
    shown = {}
    for finding in findings:
        shown[finding.source] = shown.get(finding.source, 0) + 1
        if limit and shown[finding.source] > limit:
            continue
        lines.append(f"LEAK {finding.secret} ({finding.form}) at {finding.location}: "
                     f"{finding.excerpt}")
    lines += [f"... and {count - limit} more finding(s) in {source}"
              for source, count in shown.items() if limit and count > limit]
    return [scanner.redact(line) for line in lines]


def main(argv=None):
    args = parse_args(argv)
    try:
        secrets = load_secrets(args.secrets)
        scanner = Scanner(secrets)
    except SecretScanError as e:
        print(f"secret-scan: {e}", file=sys.stderr)
        return 2
    findings, summary = scan_sources(scanner, args)
    summary.insert(0, f"{len(secrets)} secret(s), {len(scanner.needles)} needle(s)")
    for line in report(scanner, findings, summary, args.limit):
        print(line)
    if findings:
        return 1
    return 2 if scanner.errors else 0


if __name__ == "__main__":
    sys.exit(main())
