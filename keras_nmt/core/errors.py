"""Every error class of the package, and which of them a user can fix.

A :class:`UserError` is a mistake the user can correct (a wrong path, a bad option, a
damaged file, runs that do not combine): every command prints it as one line
``PROG: error: MESSAGE`` and exits with status 2 (:func:`keras_nmt.cli.common.run_command`),
so its message is written for the user and names what to change. Any other exception
out of a command is a bug, and shows its traceback.

The classes that were ``ValueError`` subclasses before they came here still are, so an
``except ValueError`` around the code that raises them keeps catching them.

It imports nothing, so the onnxruntime path and the server raise and catch these
without loading the modules (TensorFlow, Keras, NumPy) that raise the others.
"""

from __future__ import annotations


class UserError(Exception):
    """An error the user can fix; a command prints its message as one line and exits 2."""


# Inputs: text, corpora, vocabularies, tokenizers.

class InputError(UserError, ValueError):
    """Text input that cannot be read (a missing file, bytes that are not UTF-8, an
    n-best index past the last line); the message names where and what is wrong."""


class CorpusError(InputError):
    """A corpus that cannot be read (no such directory, a missing side of a split, line
    counts that differ, invalid UTF-8); the message names the file and what is wrong."""


class DownloadError(CorpusError):
    """A file of the WMT'14 recipe that could not be fetched or failed its size or digest
    check; the message says which file and how to provide it by hand."""


class VocabularyError(UserError, ValueError):
    """A vocabulary that cannot be used: a file missing or unreadable, or tokens that do
    not start with the reserved symbols or repeat one."""


class CodecError(UserError, ValueError):
    """A tokenizer setting or model file that cannot be used (an unknown tokenizer, a
    missing SentencePiece model or one that does not match the vocabulary, a failed
    SentencePiece training); the message says why."""


class PreparedError(UserError, ValueError):
    """Prepared training data that is missing or does not match its manifest."""


class DictionaryError(UserError, ValueError):
    """An unknown-word replacement dictionary (--dictionary) that cannot be used (missing,
    a directory, not UTF-8, a line that is not ``source<TAB>target``); the message says
    where and why."""


class AlignmentError(UserError, ValueError):
    """A gold alignment file that cannot be used (missing, unreadable, a line that is not
    Pharaoh links); the message says where and why."""


class MarkupError(InputError):
    """A line of markup (``--markup html|xml``) that cannot be translated with its tags
    kept: XML that is not well-formed, an HTML end tag that matches no open element, nesting
    deeper than the limit; the message names the line's column and the problem."""


# Settings and runs.

class ConfigError(UserError, ValueError):
    """A configuration value, override or option that cannot be used (an unknown
    variant, a value out of range, options that contradict each other or the run being
    resumed); the message is for users."""


class StrategyError(UserError, ValueError):
    """A distribution strategy that cannot be set up here (an unknown name, multiworker
    without TF_CONFIG, --jit with a strategy); the message says why."""


class RunDirError(UserError, ValueError):
    """A run directory that cannot be used (missing, no config.json, no trained weights,
    a damaged file it holds); the message says why."""


class CheckpointMismatchError(RunDirError):
    """A checkpoint that lacks model variables, or holds them in other shapes, than the
    model it is loaded into."""


class RunWriteError(RunDirError):
    """The run directory could not be written while training (disk full, permissions);
    the message names the last complete checkpoint to resume from."""


class TrainingDiverged(UserError, RuntimeError):
    """The training loss became NaN or infinite; the message says where to resume from
    (with other settings: a lower learning rate, another precision)."""


class EnsembleError(UserError, ValueError):
    """Run directories (or models) that cannot be combined in an ensemble (other language
    pairs or vocabularies); the message names them."""


class LexiconError(UserError, ValueError):
    """A lexical table that cannot be built or used (none for a --shortlist, one that does
    not fit the run's vocabularies or exceeds its limits); the message says why."""


class EvaluationError(UserError, ValueError):
    """Files or options that the evaluation cannot use (a missing or empty --src, line
    counts that differ, --sentences past the test set, --tune with an ensemble); the
    message is for the user."""


class ConstraintError(UserError, ValueError):
    """Constraints that cannot be decoded (an empty phrase, too many, longer than an output
    may be, a phrase to include that holds one to avoid, a file that is not JSON lines);
    the message says which."""


# Exports and serving.

class ExportError(UserError, ValueError):
    """An export that cannot be made (a directory that is not writable, an int8 model
    that loses too much BLEU), or an export directory that cannot be used (a missing
    version or file); the message is one line."""


class UsageError(UserError, ValueError):
    """Options of ``keras-nmt serve`` or ``keras-nmt onnx-translate`` that do not fit
    together or do not fit the export, or an address the server cannot listen on."""


class ServingError(UserError):
    """A failure of ``keras-nmt tfserving-client`` to report as one line: the server's
    error, an answer that is not what TF Serving sends, a timeout."""


class Unreachable(ServingError):
    """The connection to TF Serving failed (refused, reset, dropped) or the server said
    it is unavailable: the client tries again, and raises it when the retries run out."""


class RequestError(Exception):
    """A request the HTTP server refuses (``keras-nmt serve``): an HTTP status and a
    one-line reason, answered as TF Serving answers errors, ``{"error": REASON}``. Not a
    :class:`UserError`: the server answers it to the client and keeps running."""

    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason
