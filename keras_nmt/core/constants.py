"""The reserved tokens and their ids, shared by every vocabulary, codec, model and search.

Id 0 is padding everywhere: batches are padded with it, masks are ``ids != PAD_ID``.
"""

PAD, UNK, BOS, EOS = "<pad>", "<unk>", "<s>", "</s>"
RESERVED = (PAD, UNK, BOS, EOS)
PAD_ID, UNK_ID, BOS_ID, EOS_ID = 0, 1, 2, 3
