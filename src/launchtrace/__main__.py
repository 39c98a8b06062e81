import sys

from launchtrace.cli import main

sys.exit(main())
