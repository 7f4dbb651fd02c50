"""``python -m keras_nmt.cli COMMAND ...``: the ``keras-nmt`` command without the script."""

import sys

from keras_nmt.cli import main

sys.exit(main())
