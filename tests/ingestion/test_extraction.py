import shutil

import pytest

from ingestion import extraction
from tests.ingestion import site as website

needs_ocr = pytest.mark.skipif(not shutil.which("tesseract") or not shutil.which("pdftoppm"), reason="needs OCR tools")


def written(tmp_path, name: str, body: bytes):
    path = tmp_path / name
    path.write_bytes(body)
    return path


def test_kinds_come_from_the_first_bytes(tmp_path):
    assert extraction.file_kind(written(tmp_path, "x.bin", website.pdf("x"))) == "pdf"
    assert extraction.file_kind(written(tmp_path, "x.pdf", website.png_of_text("x"))) == "png"
    assert extraction.file_kind(written(tmp_path, "x.png", b"<html>")) == "other"


def test_a_text_layer_is_read_without_ocr(tmp_path):
    text, method = extraction.extract_text(written(tmp_path, "t.pdf", website.pdf(website.TEXT)), "pdf")
    assert (text, method) == (website.TEXT, "text_layer")


@needs_ocr
def test_an_image_is_read_by_tesseract(tmp_path):
    path = written(tmp_path, "s.png", website.png_of_text("Tesseract reads this line"))
    text, method = extraction.extract_text(path, "png")
    assert method == "ocr" and "Tesseract reads this line" in text


def test_without_tesseract_ocr_is_unavailable(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(extraction.OcrUnavailable, match="tesseract is not installed"):
        extraction.extract_text(written(tmp_path, "s.png", website.png_of_text("x")), "png")


def test_a_damaged_pdf_or_an_unknown_kind_cannot_be_read(tmp_path):
    with pytest.raises(extraction.ExtractionError, match="unreadable PDF"):
        extraction.extract_text(written(tmp_path, "d.pdf", b"%PDF-1.4 garbage"), "pdf")
    with pytest.raises(extraction.ExtractionError, match="kind other"):
        extraction.extract_text(written(tmp_path, "o", b"x"), "other")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("A perfectly ordinary sentence of text.", None),
        ("short", "too little text (5 letters)"),
        (
            "12 34 56 78 90 12 34 56 78 90 12 34 ab cd ef gh ij kl mn op qr st uv",
            "mostly not letters (22 of 46 characters)",
        ),
    ],
)
def test_the_quality_gate(text, reason):
    assert extraction.review_reason(text) == reason
