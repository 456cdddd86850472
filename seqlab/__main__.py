import sys

from seqlab.cli import main

sys.exit(main())
