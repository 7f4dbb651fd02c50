import sys

from keras_nmt.cli.export import main

sys.exit(main(prog="export"))
