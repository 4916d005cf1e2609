"""`python -m realm_hf.convert --help`."""

import sys

from .command_line import main

sys.exit(main())
