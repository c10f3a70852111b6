"""The choices of the language-model path, importable without torch."""

DECODINGS = ("free", "legal")
ADAPTERS = ("shared", "per_role")
TOKEN_NORMS = ("sequence", "token", "constant")
