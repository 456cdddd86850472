"""Word vectors: text files (GloVe, word2vec header, .gz) and the bundled GloVe 6B 50d."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from seqlab.errors import SeqlabError
from seqlab.features.vectors import load_vectors


def test_glove_text_keeps_only_wanted(tmp_path):
    f = tmp_path / "vec.txt"
    f.write_text("the 0.1 0.2 0.3\ncat 1 2 3\ndog 4 5 6\n")
    vectors, dim = load_vectors(str(f), {"cat", "bird"})
    assert dim == 3 and list(vectors) == ["cat"]
    assert np.allclose(vectors["cat"], [1, 2, 3])


def test_word2vec_header_and_gzip(tmp_path):
    f = tmp_path / "vec.txt.gz"
    with gzip.open(f, "wt", encoding="utf-8") as g:
        g.write("2 3\ncat 1 2 3\ndog 4 5 6\n")
    vectors, dim = load_vectors(str(f), {"dog"})
    assert dim == 3 and np.allclose(vectors["dog"], [4, 5, 6])


def test_bad_vector_files(tmp_path):
    f = tmp_path / "bad.txt"
    f.write_text("cat 1 2 3\ndog 4 5\n")
    with pytest.raises(SeqlabError, match="bad.txt:2"):
        load_vectors(str(f), {"dog"})
    with pytest.raises(SeqlabError, match="no such"):
        load_vectors(str(tmp_path / "none.txt"), {"dog"})


def test_packaged_glove_6b_50d():
    vectors, dim = load_vectors("glove-6b-50d", {"the", "chunking", "zzzunknownzzz"})
    assert dim == 50 and set(vectors) == {"the", "chunking"}
    assert vectors["the"].dtype == np.float32 and abs(float(vectors["the"][0]) - 0.418) < 1e-3
