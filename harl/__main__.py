import sys

from harl.cli import main

sys.exit(main())
