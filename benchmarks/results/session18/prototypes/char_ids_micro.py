"""New types' char ids: token by token (_char_ids) against all at once by str.translate (_char_id_rows), over the
distinct CoNLL-2000 test tokens, best of 7, ms."""
from chunker import best_of, fresh_chunker
tagger, corpus = fresh_chunker(1)
chars = tagger.featurizers["char"]
tokens = list(dict.fromkeys(t for s in corpus.test for t in s.tokens))
print(len(tokens), "distinct tokens")
each = best_of(lambda _: [chars._char_ids(t) for t in tokens], [0], 7)
at_once = best_of(lambda _: chars._char_id_rows(tokens), [0], 7)
print(f"token by token {each * 1e3:.2f} ms, at once {at_once * 1e3:.2f} ms")
