import sys

from thundervis.cli import main

sys.exit(main())
