#!/usr/bin/python3
"""An HTTPS test server that answers like kube-apiserver answers a gzip-compressed list page, over
HTTP/2 or HTTP/1.1, whichever the client's ALPN asks for.

GET /watch...  response headers, then nothing: the stream stays open (an idle watch).
GET /other...  a page body: DATA frames of 4096 bytes (kube-apiserver's handler chunk size), the
               last one carrying END_STREAM, every frame in a TLS record of its own and all the
               records handed to the socket in one write, so they arrive together. A client that
               reads them through another stream's transfer fills this stream's receive buffer
               with the first frames and meets the last one with no room left.
Over HTTP/1.1 the same body is sent with a Content-Length. Every response names the protocol it
went over in its x-served-over header (h2 or http/1.1).

Runs on Debian's python3 with python3-h2 (scripts/install-deps). Prints "listening on PORT" once
it accepts connections. Test use only.
"""

import argparse
import socket
import ssl
import sys
import threading

import h2.config
import h2.connection
import h2.events
import h2.exceptions

FRAME = 4096


def tls_records(obj, out_bio, payloads):
    """The TLS records of `payloads`, one record each, as bytes for the wire."""
    for payload in payloads:
        obj.write(payload)
    return out_bio.read()


class Connection:
    def __init__(self, sock, context, body):
        self.sock = sock
        self.body = body
        self.in_bio, self.out_bio = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.in_bio, self.out_bio, server_side=True)

    def flush(self):
        data = self.out_bio.read()
        if data:
            self.sock.sendall(data)

    def fill(self):
        data = self.sock.recv(65536)
        if not data:
            raise EOFError
        self.in_bio.write(data)

    def handshake(self):
        while True:
            try:
                self.tls.do_handshake()
                self.flush()
                return
            except ssl.SSLWantReadError:
                self.flush()
                self.fill()

    def read(self):
        while True:
            try:
                data = self.tls.read(65536)
                if not data:  # the client's close_notify
                    raise EOFError
                return data
            except ssl.SSLWantReadError:
                self.flush()
                self.fill()

    def serve(self):
        self.handshake()
        if self.tls.selected_alpn_protocol() == "h2":
            self.serve_h2()
        else:
            self.serve_http1()

    def serve_h2(self):
        h2c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
        h2c.initiate_connection()
        self.tls.write(h2c.data_to_send())
        self.flush()
        while True:
            pages = []
            for event in h2c.receive_data(self.read()):
                if isinstance(event, h2.events.RequestReceived):
                    path = dict(event.headers)[":path"]
                    h2c.send_headers(event.stream_id, [(":status", "200"), ("content-type", "application/json"),
                                                       ("x-served-over", "h2")])
                    if not path.startswith("/watch"):
                        pages.append(event.stream_id)
            self.tls.write(h2c.data_to_send())
            self.flush()
            for stream_id in pages:
                frames = []
                for offset in range(0, len(self.body), FRAME):
                    last = offset + FRAME >= len(self.body)
                    h2c.send_data(stream_id, self.body[offset:offset + FRAME], end_stream=last)
                    frames.append(h2c.data_to_send())
                self.sock.sendall(tls_records(self.tls, self.out_bio, frames))

    def serve_http1(self):
        pending = b""
        while True:
            while b"\r\n\r\n" not in pending:
                pending += self.read()
            head, pending = pending.split(b"\r\n\r\n", 1)
            path = head.split(b" ")[1].decode()
            if path.startswith("/watch"):
                self.tls.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                               b"transfer-encoding: chunked\r\n\r\n")
                self.flush()
                continue  # held open: the client sends nothing more on this connection
            self.tls.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nx-served-over: http/1.1\r\n"
                           b"content-length: %d\r\n\r\n" % len(self.body) + self.body)
            self.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--body-bytes", type=int, default=4 * FRAME + 1000)
    args = p.parse_args()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(args.cert, args.key)
    context.set_alpn_protocols(["h2", "http/1.1"])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    print(f"listening on {listener.getsockname()[1]}", flush=True)
    body = b"x" * args.body_bytes

    def serve(sock):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            Connection(sock, context, body).serve()
        except (EOFError, OSError, ssl.SSLError, h2.exceptions.ProtocolError):
            pass
        finally:
            sock.close()

    while True:
        sock, _ = listener.accept()
        threading.Thread(target=serve, args=(sock,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
