"""`python -m raims_node.msglog` is `ms_msglog`."""

import sys

from raims_node.msglog.cli import main

sys.exit(main())
