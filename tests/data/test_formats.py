"""predict's input-format guess: the evidence of every line decides, not the first few lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from seqlab.data.formats import guess_format

SAMPLE = Path(__file__).resolve().parents[2] / "seqlab" / "resources" / "conll2000" / "test.txt"

CONLL = "".join(f"w{i} NN {'B' if i % 4 == 0 else 'I'}-NP\n" + ("\n" if i % 4 == 3 else "") for i in range(40))
PARAGRAPH = "今天天气很好我们一起去公园散步然后回家吃饭晚上看了一部电影"


def lines(text: str) -> list[str]:
    """The lines as the readers give them: a final line ending starts no line."""
    return text.removesuffix("\n").split("\n") if text else []


@pytest.mark.parametrize(
    "text, fmt, width",
    [
        (CONLL, "conll", 3),
        (CONLL.replace("w5 NN I-NP", "w5 I-NP").replace("w17 NN I-NP", "w17 NN I-NP extra"), "conll", 3),  # ragged
        ("w0 I-NP\n" + CONLL, "conll", 3),  # the first line is the odd one: the majority still decides
        ("-DOCSTART- -X- O\n\n" + CONLL, "conll", 3),
        (
            "".join(f"{c}\n" + ("\n" if i % 5 == 4 else "") for i, c in enumerate(PARAGRAPH)),
            "conll",
            1,
        ),  # one char per line
        ("".join(f"word{i}\n" + ("\n" if i % 6 == 5 else "") for i in range(30)), "conll", 1),  # one word per line
        (f"{PARAGRAPH}\n\n{PARAGRAPH[:20]}\n\n{PARAGRAPH[5:]}\n", "raw", None),  # paragraphs between blank lines
        (f"{PARAGRAPH}\n{PARAGRAPH[3:]}\n\n{PARAGRAPH}\n{PARAGRAPH[:25]}\n\n", "raw", None),  # wrapped paragraphs
        (f"{PARAGRAPH[:12]}\n{PARAGRAPH[12:24]}\n{PARAGRAPH[24:]}\n", "raw", None),  # one sentence per line
        ("He reckons the deficit will narrow .\nThe pound fell .\n", "raw", None),
        ("Hello world\n\n", "raw", None),  # one line is not a sentence of tokens
        ("a b\nc d\ne f\n", "raw", None),  # no blank line ends a sentence
        ("", "raw", None),
        ("\n\n \n", "raw", None),
    ],
)
def test_guess_format(text, fmt, width):
    guess = guess_format(lines(text))
    assert (guess.format, guess.width) == (fmt, width), guess.reason
    assert guess.reason and "\n" not in guess.reason


def test_the_bundled_conll_file_is_conll():
    guess = guess_format(lines(SAMPLE.read_text(encoding="utf-8")))
    assert (guess.format, guess.width) == ("conll", 3)


def test_raw_text_with_a_few_equal_lines_stays_raw():
    text = "".join(f"{' '.join(['word'] * (3 + i % 7))}\n" + ("\n" if i % 2 else "") for i in range(50))
    assert guess_format(lines(text)).format == "raw"
