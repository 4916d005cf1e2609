"""`python -m realm_hf.cli ...` (and `accelerate launch -m realm_hf.cli ...`): the `realm-hf` command."""

import sys

from . import main

sys.exit(main())
