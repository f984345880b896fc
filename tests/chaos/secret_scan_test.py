#!/usr/bin/env python3
"""Tests of syncbus_tools.secret_scan: planted secrets are found in every form a whole-system
run can leave them in (raw in a log, inside a base64-encoded kubeconfig at each alignment, a key
re-wrapped or JSON-escaped, a password percent-encoded, across a chunk boundary, in the broker's
queued messages and in a metrics page), clean inputs give no findings, and no report shows a
secret. The broker is a small local HTTP server imitating the two management API endpoints."""

import base64
import contextlib
import gzip
import http.server
import io
import json
import os
import random
import re
import socket
import tempfile
import threading
import unittest
import urllib.parse

from syncbus_tools import secret_scan as ss

RANDOM = random.Random(20261123)


def random_bytes(count):
    """Reproducible random bytes."""
    return RANDOM.randbytes(count)


def make_token():
    """A bearer token shaped like an OpenShift one."""
    return "sha256~" + base64.urlsafe_b64encode(random_bytes(32)).decode().rstrip("=")


def make_pem(kind="RSA PRIVATE KEY", der_size=1191, width=64):
    """(PEM text, DER bytes) of a stand-in private key: the scanner never parses the DER."""
    der = random_bytes(der_size)
    body = base64.b64encode(der).decode()
    lines = [body[i:i + width] for i in range(0, len(body), width)]
    return f"-----BEGIN {kind}-----\n" + "\n".join(lines) + f"\n-----END {kind}-----\n", der


def rewrap(pem, width):
    """The PEM text with its body wrapped at another width."""
    lines = pem.strip().splitlines()
    body = "".join(lines[1:-1])
    return "\n".join([lines[0]] + [body[i:i + width] for i in range(0, len(body), width)] + [lines[-1]]) + "\n"


TOKEN, OTHER_TOKEN = make_token(), make_token()
KEY_PEM, KEY_DER = make_pem(der_size=1158)   # its last body line has 8 characters
TLS_PEM, TLS_DER = make_pem("PRIVATE KEY", 1218)
PASSWORD = "Rb/9+kq@Zt:7x%w2&Lm"
SECRETS = {"kube-token": TOKEN, "other-token": OTHER_TOKEN, "kube-client-key": KEY_PEM,
           "tls-client-key": TLS_PEM, "broker-password": PASSWORD}


def scanner(chunk_size=ss.CHUNK_SIZE):
    return ss.Scanner([ss.Secret(name, value) for name, value in SECRETS.items()], chunk_size)


def kubeconfig(token, key_pem, pad):
    """A kubeconfig whose token starts `pad` bytes further in (the cluster name grows)."""
    key_data = base64.b64encode(key_pem.encode()).decode()
    return (f"apiVersion: v1\nkind: Config\nclusters:\n- name: cluster-0007{'x' * pad}\n"
            f"  cluster:\n    server: https://api.cluster-0007.example:6443\n"
            f"users:\n- name: admin\n  user:\n    token: {token}\n"
            f"    client-key-data: {key_data}\n")


def kube_secret(kubeconfig_text, encode=base64.b64encode):
    """A Kubernetes Secret holding a kubeconfig, as the API serves it."""
    return json.dumps({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": "cluster-0007-admin-kubeconfig"},
                       "data": {"kubeconfig": encode(kubeconfig_text.encode()).decode()}})


def all_needle_texts(scan):
    """Every needle as text, to prove a report shows none."""
    return [n.data.decode("utf-8", "surrogateescape") for n in scan.needles]


def forms(findings, secret):
    return [f.form for f in findings if f.secret == secret]


class NeedleTest(unittest.TestCase):
    """The needles a secret gives."""

    def test_short_secret_is_refused(self):
        with self.assertRaisesRegex(ss.SecretScanError, "'pw' is 8 characters long: at least 12"):
            ss.derive_needles(ss.Secret("pw", "hunter22"))

    def test_short_needle_is_refused(self):
        pem = "-----BEGIN PRIVATE KEY-----\nAAAAAA==\n-----END PRIVATE KEY-----\n"
        with self.assertRaisesRegex(ss.SecretScanError, "'stub': its pem-body form is 8 characters "
                                                        "long, under the 12 needed"):
            ss.derive_needles(ss.Secret("stub", pem))

    def test_key_without_end_line_is_refused(self):
        with self.assertRaisesRegex(ss.SecretScanError, "no complete -----BEGIN/-----END block"):
            ss.derive_needles(ss.Secret("cut", KEY_PEM[:300]))

    def test_forms_of_a_key(self):
        needles = {n.data: n.form for n in ss.derive_needles(ss.Secret("k", KEY_PEM))}
        pem = KEY_PEM.strip()
        body = "".join(pem.splitlines()[1:-1])
        for data in (pem.encode(), body.encode(), body[:64].encode(), body[64:128].encode(), KEY_DER,
                     KEY_DER.hex().encode(), pem.encode().hex().encode(),
                     json.dumps(pem)[1:-1].encode(), base64.b64encode(pem.encode())[:8 * len(pem) // 6]):
            self.assertIn(data, needles)
        names = set(needles.values())
        self.assertLessEqual({f"{form}@{k}" for form in ("base64", "base64-of-base64", "pem-der-base64",
                                                         "pem-der-base64url") for k in (1, 2)}, names)
        lines = [name for name in names if name.startswith("pem-line-")]
        self.assertEqual(len(lines), len(body) // 64)   # the short last line is no needle

    def test_base64_needles_hold_at_every_alignment(self):
        for length in range(12, 24):
            value = base64.b16encode(random_bytes(length)).decode()[:length]
            needles = {n.form: n.data for n in ss.derive_needles(ss.Secret("s", value))}
            for offset in range(3):
                for after in range(3):
                    blob = random_bytes(3 + offset) + value.encode() + random_bytes(after)
                    url_needle = needles.get(f"base64url@{offset}", needles[f"base64@{offset}"])
                    with self.subTest(length=length, offset=offset, after=after):
                        self.assertIn(needles[f"base64@{offset}"], base64.b64encode(blob))
                        self.assertIn(url_needle, base64.urlsafe_b64encode(blob))


class ScanTest(unittest.TestCase):
    """Planted secrets are found, clean inputs are not."""

    def setUp(self):
        self.scan = scanner()
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def write(self, name, data):
        path = os.path.join(self.dir.name, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return path

    def test_raw_token_in_a_log_line(self):
        path = self.write("logs/consumer-1.log",
                          "2026-11-23T23:20:01Z info consumer started\n"
                          "2026-11-23T23:20:02Z info cluster-0007 prepared\n"
                          f"2026-11-23T23:20:02Z debug GET /api Authorization: Bearer {TOKEN} status=200\n")
        findings = self.scan.scan_tree(self.dir.name)
        self.assertEqual(len(findings), 1)
        finding = findings[0]
        self.assertEqual((finding.secret, finding.form, finding.source, finding.line),
                         ("kube-token", "raw", path, 3))
        self.assertEqual(finding.location, f"{path}:3 (byte {finding.offset})")
        self.assertIn("Authorization: Bearer <<kube-token>> status=200", finding.excerpt)
        self.assertNotIn(TOKEN, finding.excerpt)

    def test_token_in_a_base64_kubeconfig_in_a_kubernetes_secret_at_every_alignment(self):
        for pad in range(3):
            config = kubeconfig(TOKEN, TLS_PEM, pad)
            offset = config.index(TOKEN) % 3
            for alphabet, encode in (("base64", base64.b64encode), ("base64url", base64.urlsafe_b64encode)):
                with self.subTest(alignment=offset, alphabet=alphabet):
                    findings = self.scan.scan_text("secret.json", kube_secret(config, encode))
                    self.assertIn(forms(findings, "kube-token"),
                                  ([f"base64@{offset}"], [f"{alphabet}@{offset}"]))
                    # the blob's characters that hold part of the token are masked too
                    token_finding = [f for f in findings if f.secret == "kube-token"][0]
                    self.assertEqual(token_finding.excerpt, "...<<kube-token>>...")
                    self.assertTrue(forms(findings, "tls-client-key"))
                    self.assertEqual(forms(findings, "other-token"), [])
        self.assertEqual({kubeconfig(TOKEN, TLS_PEM, pad).index(TOKEN) % 3 for pad in range(3)}, {0, 1, 2})

    def test_client_key_data_in_a_base64_kubeconfig(self):
        for pad in range(3):
            config = kubeconfig(OTHER_TOKEN, KEY_PEM, pad)
            offset = config.index("client-key-data: ") + len("client-key-data: ")
            with self.subTest(alignment=offset % 3):
                findings = self.scan.scan_text("secret.json", kube_secret(config))
                self.assertEqual(forms(findings, "kube-client-key"), [f"base64-of-base64@{offset % 3}"])
        findings = self.scan.scan_text("kubeconfig", kubeconfig(OTHER_TOKEN, KEY_PEM, 0))
        self.assertEqual(forms(findings, "kube-client-key"), ["base64@0"])

    def test_key_rewrapped_at_76_columns(self):
        path = self.write("dump.txt", "client key:\n" + rewrap(KEY_PEM, 76))
        findings = self.scan.scan_file(path)
        self.assertEqual([(f.secret, f.line) for f in findings], [("kube-client-key", 3)])
        self.assertTrue(findings[0].form.startswith("pem-line-"))
        self.assertEqual(findings[0].excerpt, "<<kube-client-key>>")   # the mask, no line of the body

    def test_key_in_a_json_string(self):
        variants = {"json.dumps": json.dumps({"key": KEY_PEM}),
                    "crlf": json.dumps({"key": KEY_PEM.replace("\n", "\r\n")}),
                    "escaped slashes": json.dumps({"key": KEY_PEM}).replace("/", "\\/"),
                    "rewrapped": json.dumps({"key": rewrap(KEY_PEM, 72)}),
                    "nested": json.dumps({"log": json.dumps({"key": KEY_PEM})})}
        for name, text in variants.items():
            with self.subTest(name):
                findings = self.scan.scan_text(name, text)
                self.assertEqual([f.secret for f in findings], ["kube-client-key"], findings)
                self.assertNotIn(KEY_PEM.splitlines()[1], findings[0].excerpt)

    def test_key_in_binary(self):
        data = random_bytes(5000) + TLS_DER + random_bytes(5000)
        findings = self.scan.scan_file(self.write("message.bin", data))
        self.assertEqual([(f.secret, f.form, f.offset) for f in findings],
                         [("tls-client-key", "pem-der", 5000)])

    def test_password_percent_encoded_in_a_url(self):
        quoted = urllib.parse.quote(PASSWORD, safe="")
        lowercase = re.sub("%..", lambda m: m.group().lower(), quoted)
        for name, text in {"uppercase": f"connecting to amqp://syncbus:{quoted}@10.0.0.5:5672/%2F",
                           "lowercase": f"dsn=amqp://syncbus:{lowercase}@h:5672/",
                           "form": "user=syncbus&password=" + urllib.parse.quote_plus(PASSWORD)}.items():
            with self.subTest(name):
                findings = self.scan.scan_text(name, text)
                self.assertEqual([f.secret for f in findings], ["broker-password"])
                self.assertNotIn(quoted, findings[0].excerpt)
        findings = self.scan.scan_text("log", f"amqp://syncbus:{quoted}@10.0.0.5:5672/")
        self.assertEqual(findings[0].excerpt, "amqp://syncbus:<<broker-password>>@10.0.0.5:5672/")

    def test_needle_across_the_chunk_boundary_of_a_large_file(self):
        line = b"2026-11-23T23:20:01.061Z info consumer applied cluster-0007 set ss-00 gen 2 ok\n"
        head = line * (ss.CHUNK_SIZE // len(line))
        head += b"x" * (ss.CHUNK_SIZE - 10 - len(head))
        data = head + TOKEN.encode() + b"\n" + line * 20000
        findings = self.scan.scan_file(self.write("big.log", data))
        self.assertEqual([(f.secret, f.form, f.offset, f.line) for f in findings],
                         [("kube-token", "raw", ss.CHUNK_SIZE - 10, head.count(b"\n") + 1)])
        self.assertEqual(self.scan.bytes_scanned, len(data))

    def test_needles_at_every_chunk_boundary_are_found_once(self):
        chunk = 16384
        small = scanner(chunk_size=chunk)
        filler = b"noise line\n" * (chunk // 10)
        data, planted = bytearray(), []
        for boundary in range(chunk, 40 * chunk, chunk):
            # one token just before the boundary (in the part searched again with the next
            # chunk, yet reported once), one across it
            for start in (boundary - 2 * len(TOKEN) - RANDOM.randrange(100),
                          boundary - RANDOM.randrange(1, len(TOKEN))):
                data += filler[:start - len(data)]
                planted.append(len(data))
                data += TOKEN.encode()
        data = bytes(data + b"\nend\n")
        self.assertEqual(sum(p // chunk != (p + len(TOKEN) - 1) // chunk for p in planted), 39)
        findings = small.scan_file(self.write("chunks.log", data))
        self.assertEqual([f.offset for f in findings], planted)
        self.assertEqual([f.line for f in findings], [data.count(b"\n", 0, p) + 1 for p in planted])

    def test_gram_search_finds_what_a_plain_search_finds(self):
        needles = self.scan.needles
        data = bytearray(base64.b64encode(random_bytes(300000)))
        for _ in range(300):
            needle = RANDOM.choice(needles).data
            at = RANDOM.randrange(len(data) - len(needle))
            data[at:at + len(needle)] = needle
        data, expected = bytes(data), set()
        for n in needles:
            start = data.find(n.data)
            while start != -1:
                expected.add((start, n.form, n.secret))
                start = data.find(n.data, start + 1)
        found = {(start, n.form, n.secret) for start, _, n in self.scan._matches(data)}
        self.assertGreater(len(expected), 300)
        self.assertEqual(found, expected)

    def test_gzip_compressed_log(self):
        path = self.write("old.log.gz", gzip.compress(f"line\nuser=syncbus password={PASSWORD}\n".encode()))
        findings = self.scan.scan_file(path)
        self.assertEqual([(f.secret, f.line) for f in findings], [("broker-password", 2)])

    def test_clean_inputs_give_no_findings(self):
        noise = base64.b64encode(random_bytes(5 << 20))
        self.write("noise.b64", b"\n".join(noise[i:i + 76] for i in range(0, len(noise), 76)))
        self.write("noise.bin", random_bytes(2 << 20))
        self.write("logs/publisher.log", "".join(
            f"2026-11-23T23:20:{i % 60:02d}Z info published cluster-{i:04d} revision "
            f"{random_bytes(6).hex()} token=REDACTED\n" for i in range(20000)))
        self.write("secret.json", kube_secret(kubeconfig(make_token(), make_pem()[0], 1)))
        self.assertEqual(self.scan.scan_tree(self.dir.name), [])
        self.assertEqual(self.scan.scan_text("metrics", "syncbus_applies_total{lane=\"change\"} 20000\n"), [])
        self.assertEqual(self.scan.sources, 5)
        self.assertEqual(self.scan.errors, [])

    def test_tree_exclude(self):
        self.write("run/hub.kubeconfig", kubeconfig(TOKEN, KEY_PEM, 0))
        self.write("run/logs/consumer.log", f"token {TOKEN}\n")
        findings = self.scan.scan_tree(self.dir.name, exclude=["*.kubeconfig"])
        self.assertEqual([os.path.basename(f.source) for f in findings], ["consumer.log"])
        self.assertEqual(self.scan.scan_tree(self.dir.name, exclude=["run/logs/*", "hub.*"]), [])


def run_main(args):
    """(exit code, stdout + stderr) of the command line."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            code = ss.main(args)
        except SystemExit as e:
            code = e.code
    return code, out.getvalue()


class CommandLineTest(unittest.TestCase):
    """The command line's report and exit codes."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)
        self.secrets = os.path.join(self.dir.name, "secrets.json")
        with open(self.secrets, "w", encoding="utf-8") as f:
            json.dump(SECRETS, f)
        self.run_dir = os.path.join(self.dir.name, "run")
        os.makedirs(self.run_dir)

    def plant(self, name, text):
        with open(os.path.join(self.run_dir, name), "w", encoding="utf-8") as f:
            f.write(text)

    def test_report_never_shows_a_secret(self):
        quoted = urllib.parse.quote(PASSWORD, safe="")
        self.plant("consumer.log", f"Authorization: Bearer {TOKEN}\nkey:\n{rewrap(KEY_PEM, 76)}")
        self.plant("secret.json", kube_secret(kubeconfig(OTHER_TOKEN, TLS_PEM, 2)))
        self.plant("broker.log", f"connecting amqp://syncbus:{quoted}@h:5672 and {PASSWORD}\n")
        self.plant("events.json", json.dumps({"key": TLS_PEM, "note": TOKEN}))
        leak_dir = os.path.join(self.run_dir, f"http:--syncbus:{quoted}@h")   # a secret in a path
        os.makedirs(leak_dir)
        with open(os.path.join(leak_dir, "x.log"), "w", encoding="utf-8") as f:
            f.write(f"again {OTHER_TOKEN}\n")
        code, output = run_main(["--secrets", self.secrets, "--dir", self.run_dir, "--dir", self.dir.name])
        self.assertEqual(code, 1, output)
        for name in SECRETS:
            self.assertIn(f"LEAK {name} ", output)
        for text in all_needle_texts(scanner()) + list(SECRETS.values()):
            self.assertNotIn(text, output)
        self.assertNotIn("secrets.json", output)   # the secrets file itself is never scanned

    def test_clean_run_exits_0(self):
        self.plant("consumer.log", "all good\n")
        code, output = run_main(["--secrets", self.secrets, "--dir", self.run_dir])
        self.assertEqual(code, 0, output)
        self.assertIn("secret-scan: 5 secret(s)", output)
        self.assertIn("scanned 1 file(s), 0 page(s)", output)
        self.assertIn("secret-scan: 0 finding(s)", output)

    def test_limit_per_source(self):
        self.plant("consumer.log", f"Bearer {TOKEN}\n" * 30)
        code, output = run_main(["--secrets", self.secrets, "--dir", self.run_dir, "--limit", "5"])
        self.assertEqual(code, 1)
        self.assertEqual(output.count("LEAK kube-token (raw)"), 5)
        self.assertIn("... and 25 more finding(s) in ", output)
        self.assertIn("secret-scan: 30 finding(s)", output)

    def test_usage_errors_exit_2(self):
        weak = os.path.join(self.dir.name, "weak.json")
        with open(weak, "w", encoding="utf-8") as f:
            json.dump({"pw": "guest"}, f)
        missing = os.path.join(self.dir.name, "missing")
        cases = {"no source": ["--secrets", self.secrets],
                 "no secrets file": ["--secrets", missing, "--dir", self.run_dir],
                 "weak secret": ["--secrets", weak, "--dir", self.run_dir],
                 "unreadable file": ["--secrets", self.secrets, "--file", missing],
                 "missing directory": ["--secrets", self.secrets, "--dir", missing]}
        for name, args in cases.items():
            with self.subTest(name):
                code, output = run_main(args)
                self.assertEqual(code, 2, output)
        self.assertIn("secret 'pw' is 5 characters long", run_main(cases["weak secret"])[1])


class FakeManagementApi(http.server.ThreadingHTTPServer):
    """The management API's queue listing and get endpoints over fixed queue contents, plus a
    metrics page; records every get request."""

    def __init__(self, queues, messages, metrics=""):
        super().__init__(("127.0.0.1", 0), FakeManagementHandler)
        self.queues, self.messages, self.metrics = queues, messages, metrics
        self.gets = []
        self.auth = "Basic " + base64.b64encode(f"syncbus:{PASSWORD}".encode()).decode()
        self.thread = threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/"

    def close(self):
        self.shutdown()
        self.server_close()
        self.thread.join()


class FakeManagementHandler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def reply(self, code, body):
        data = json.dumps(body).encode() if not isinstance(body, str) else body.encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def authorized(self):
        if self.headers.get("Authorization") == self.server.auth:
            return True
        self.reply(401, {"error": "not_authorised", "reason": "Login failed"})
        return False

    def do_GET(self):
        if self.path == "/metrics":
            self.reply(200, self.server.metrics)
        elif not self.authorized():
            return
        elif self.path.split("?")[0] == "/api/queues/%2F":
            self.reply(200, self.server.queues)
        else:
            self.reply(404, {"error": "Object Not Found"})

    def do_POST(self):
        if not self.authorized():
            return
        prefix, _, rest = self.path.partition("/api/queues/%2F/")
        name, _, action = rest.rpartition("/")
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        name = urllib.parse.unquote(name)
        self.server.gets.append((name, body))
        if prefix or action != "get" or name not in self.server.messages:
            self.reply(404, {"error": "Object Not Found"})
        else:
            self.reply(200, self.server.messages[name][:body["count"]])


def api_message(payload, headers=None, routing_key="syncbus.work.change"):
    """A message as POST .../get answers with encoding auto."""
    try:
        text, encoding = payload.decode("utf-8"), "string"
    except UnicodeDecodeError:
        text, encoding = base64.b64encode(payload).decode(), "base64"
    return {"payload_bytes": len(payload), "redelivered": False, "exchange": "syncbus.work",
            "routing_key": routing_key, "message_count": 0,
            "properties": {"delivery_mode": 2, "content_type": "application/json", "headers": headers or {}},
            "payload": text, "payload_encoding": encoding}


class BrokerTest(unittest.TestCase):
    """broker_messages and --broker-env against an imitation of the management API."""

    def setUp(self):
        queues = [{"name": "syncbus.work.change", "vhost": "/", "type": "quorum", "messages": 2,
                   "messages_ready": 2, "messages_unacknowledged": 0},
                  {"name": "syncbus.dead", "vhost": "/", "type": "quorum", "messages": 3,
                   "messages_ready": 2, "messages_unacknowledged": 1},
                  {"name": "syncbus.retry.5s", "vhost": "/", "type": "quorum", "messages": 0},
                  {"name": "syncbus.trace", "vhost": "/", "type": "stream", "messages": 500},
                  {"name": "q with spaces", "vhost": "/", "type": "classic"}]
        leaking_request = f'{{"cluster":"cluster-0002","kubeconfig":"{TOKEN}"}}'.encode()
        truncated = api_message(b"x" * 50000)
        truncated["payload_bytes"] = 80000
        messages = {
            "syncbus.work.change": [api_message(b'{"cluster":"cluster-0001","revision":"a42d"}'),
                                    api_message(leaking_request)],
            "syncbus.dead": [api_message(b'{"cluster":"cluster-0007"}',
                                         {"x-death": [{"reason": "rejected"}],
                                          "x-debug": f"password={PASSWORD}"}),
                             api_message(b"\x00\x01binary" + KEY_DER + b"\xff")],
            "syncbus.retry.5s": [],
            "q with spaces": [api_message(b"late arrival, not yet in the statistics"), truncated],
        }
        metrics = f'# HELP syncbus_debug\nsyncbus_debug{{token="{OTHER_TOKEN}"}} 1\n'
        self.api = FakeManagementApi(queues, messages, metrics)
        self.addCleanup(self.api.close)

    def test_reads_every_queue_without_consuming_and_skips_streams(self):
        contents = ss.broker_messages(self.api.url, "syncbus", PASSWORD)
        gets = dict(self.api.gets)
        read = ["q with spaces", "syncbus.dead", "syncbus.retry.5s", "syncbus.work.change"]
        self.assertEqual(sorted(gets), read)   # not the stream
        for name, body in gets.items():
            self.assertEqual(body["ackmode"], "ack_requeue_true")
            self.assertEqual(body["encoding"], "auto")
            self.assertEqual(body["truncate"], 50000)
        self.assertGreaterEqual(gets["syncbus.dead"]["count"], 3)
        self.assertEqual(contents.messages, 6)
        self.assertEqual(contents.truncated, 1)
        self.assertEqual(contents.queues, read)
        self.assertEqual(len(contents.skipped), 2)
        self.assertIn("syncbus.trace: a stream", contents.skipped[1])
        self.assertIn("syncbus.dead: 1 message(s) held unacknowledged", contents.skipped[0])
        labels = [label for label, _ in contents.texts]
        self.assertIn("queue syncbus.dead message 2 payload", labels)
        self.assertIn("queue syncbus.dead message 1 properties", labels)

    def test_finds_secrets_in_payloads_headers_and_binary_payloads(self):
        contents = ss.broker_messages(self.api.url, "syncbus", PASSWORD)
        scan = scanner()
        findings = [f for label, text in contents.texts for f in scan.scan_text(label, text)]
        self.assertEqual(sorted((f.source, f.secret, f.form) for f in findings),
                         [("queue syncbus.dead message 1 properties", "broker-password", "raw"),
                          ("queue syncbus.dead message 2 payload", "kube-client-key", "pem-der"),
                          ("queue syncbus.work.change message 2 payload", "kube-token", "raw")])

    def test_wrong_password_is_an_error(self):
        with self.assertRaisesRegex(ss.SecretScanError, "HTTP 401"):
            ss.broker_messages(self.api.url, "syncbus", "wrong-password")

    def test_command_line_tries_each_node_and_scans_pages(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            dead = f"http://127.0.0.1:{s.getsockname()[1]}/"
        env_files = {"cluster.env": f'SYNCBUS_MGMT_URLS="{dead} {self.api.url}"\n',
                     "comma-separated": f"SYNCBUS_MGMT_URLS={dead},{self.api.url}\n",
                     "broker.env": f"SYNCBUS_MGMT_URL={self.api.url}\n"}
        for name, urls in env_files.items():
            with self.subTest(name), tempfile.TemporaryDirectory() as work:
                env = os.path.join(work, "broker.env")
                with open(env, "w", encoding="utf-8") as f:
                    f.write(f"{urls}SYNCBUS_BROKER_USER=syncbus\nSYNCBUS_BROKER_PASSWORD={PASSWORD}\n")
                secrets = os.path.join(work, "secrets.json")
                with open(secrets, "w", encoding="utf-8") as f:
                    json.dump(SECRETS, f)
                code, output = run_main(["--secrets", secrets, "--broker-env", env,
                                         "--url", self.api.url + "metrics"])
                self.assertEqual(code, 1, output)
                self.assertIn(f"scanned 6 broker message(s) in 4 queue(s) of vhost / via {self.api.url}",
                              output)
                self.assertIn("1 message payload(s) were cut at 50000 bytes", output)
                self.assertIn("skipped syncbus.trace: a stream", output)
                self.assertIn(f"LEAK other-token (raw) at {self.api.url}metrics:2", output)
                self.assertIn("LEAK kube-token (raw) at queue syncbus.work.change message 2 payload:1", output)
                for text in all_needle_texts(scanner()):
                    self.assertNotIn(text, output)

    def test_command_line_without_a_broker_is_an_error(self):
        with tempfile.TemporaryDirectory() as work:
            env = os.path.join(work, "broker.env")
            with open(env, "w", encoding="utf-8") as f:
                f.write("SYNCBUS_BROKER_USER=syncbus\n")
            secrets = os.path.join(work, "secrets.json")
            with open(secrets, "w", encoding="utf-8") as f:
                json.dump(SECRETS, f)
            code, output = run_main(["--secrets", secrets, "--broker-env", env])
        self.assertEqual(code, 2)
        self.assertIn("no SYNCBUS_MGMT_URLS or SYNCBUS_MGMT_URL, SYNCBUS_BROKER_PASSWORD", output)


if __name__ == "__main__":
    unittest.main()
