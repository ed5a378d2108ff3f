"""A small website for the pipeline's tests: a page linking to documents, served over HTTP
from a thread, whose files a test can change while it runs."""

import threading
from contextlib import contextmanager
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import BytesIO

from PIL import Image, ImageDraw, ImageFont

INDEX = """<html><body>
<a href="/docs/text.pdf">Annual report</a>
<a href="/docs/scan.png">Scanned letter</a>
<a href="/docs/missing.pdf">Broken link</a>
<a href="/docs/empty.pdf">Empty form</a>
<a href="/about.html">About us</a>
<a href="http://elsewhere.invalid/other.pdf">Elsewhere</a>
</body></html>"""
TEXT = "The annual report of the ministry describes public spending on roads and schools."


def pdf(text: str | None) -> bytes:
    """A one-page PDF, with ``text`` in its text layer (Helvetica), or blank."""
    content = f"BT /F1 12 Tf 40 700 Td ({text}) Tj ET".encode() if text else b""
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = BytesIO(b"%PDF-1.4\n"), []
    out.seek(0, 2)
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.writelines(b"%010d 00000 n \n" % offset for offset in offsets)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


@cache
def png_of_text(*lines: str) -> bytes:
    image = Image.new("L", (1400, 80 + 80 * len(lines)), color=255)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=44)
    for number, line in enumerate(lines):
        draw.text((30, 40 + 80 * number), line, fill=0, font=font)
    out = BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def default_files() -> dict[str, tuple[str, bytes]]:
    return {
        "/index.html": ("text/html; charset=utf-8", INDEX.encode()),
        "/about.html": ("text/html", b"<p>about</p>"),
        "/docs/text.pdf": ("application/pdf", pdf(TEXT)),
        "/docs/scan.png": (
            "image/png",
            png_of_text("Scanned letter from the city council", "about parking in the old town"),
        ),
        "/docs/empty.pdf": ("application/pdf", pdf(None)),
    }


class Site:
    def __init__(self):
        self.files = default_files()
        self.redirects: dict[str, str] = {}
        self.base_url = ""

    def url(self, path: str) -> str:
        return self.base_url + path


@contextmanager
def serving():
    site = Site()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path in site.redirects:
                self.send_response(302)
                self.send_header("Location", site.redirects[self.path])
                self.end_headers()
                return
            found = site.files.get(self.path)
            if found is None:
                self.send_error(404)
                return
            content_type, body = found
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    site.base_url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
