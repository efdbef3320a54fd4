import sys

from rmqspec.cli.main import main

sys.exit(main())
