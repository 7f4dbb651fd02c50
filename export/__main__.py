import sys

from keras_nmt.cli import run_command

sys.exit(run_command("export", None, prog="export"))
