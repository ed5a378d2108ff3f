"""Writes the demo website's binary files (two PDFs with a text layer, a scanned letter as a
PNG). Run once, and again only to change them; the files are committed, so the demo needs
neither Pillow's fonts nor the internet at run time:

    .venv/bin/python -m pipeline_project.demo.site_build
"""

from io import BytesIO
from pathlib import Path

from PIL import Image, ImageDraw, ImageFilter, ImageFont

FILES = Path(__file__).resolve().parent / "site" / "files"

ANNUAL_REPORT = (
    "Riverton Water Board - Annual Report 2024",
    "The board delivered clean water to forty thousand homes this year.",
    "Two pumping stations were renewed and leaks fell by a fifth.",
)
BUDGET = (
    "Riverton Water Board - Budget Summary 2025",
    "Spending on pipes and meters rises while office costs stay flat.",
)
LETTER = (
    "Riverton Water Board",
    "Dear resident,",
    "the water main on Mill Street",
    "will be replaced in May.",
    "Thank you for your patience.",
)


def pdf(lines: tuple[str, ...]) -> bytes:
    """A one-page PDF whose lines are in its text layer (Helvetica), as a scanner's OCR or a
    word processor would leave them: pypdf reads them back without Tesseract."""
    text = " 0 -18 Td ".join(f"({line}) Tj" for line in lines)
    content = f"BT /F1 12 Tf 50 740 Td {text} ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R"
        b" /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out, offsets = BytesIO(), []
    out.write(b"%PDF-1.4\n")
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    out.writelines(b"%010d 00000 n \n" % offset for offset in offsets)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def scan(
    lines: tuple[str, ...], *, width: int = 1100, size: int = 48, paper: int = 238, ink: int = 20, blur: float = 0.6
) -> bytes:
    """Dark text on a slightly grey, slightly blurred page: a scan, with no text but pixels (the
    pipeline's tests draw crisp ones: white paper, black ink, no blur)."""
    step = size * 2
    image = Image.new("L", (width, step * (len(lines) + 1)), color=paper)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=size)
    for number, line in enumerate(lines):
        draw.text((40, step // 2 + step * number), line, fill=ink, font=font)
    out = BytesIO()
    (image.filter(ImageFilter.GaussianBlur(blur)) if blur else image).save(out, format="PNG", optimize=True)
    return out.getvalue()


def main() -> None:
    FILES.mkdir(parents=True, exist_ok=True)
    (FILES / "annual-report-2024.pdf").write_bytes(pdf(ANNUAL_REPORT))
    (FILES / "budget-summary-2025.pdf").write_bytes(pdf(BUDGET))
    (FILES / "scanned-letter.png").write_bytes(scan(LETTER))
    for path in sorted(FILES.iterdir()):
        print(f"{path.name}: {path.stat().st_size} bytes")  # noqa: T201 (a script run by hand)


if __name__ == "__main__":
    main()
