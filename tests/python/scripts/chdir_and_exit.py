"""Changes directory to argv[1], then exits with status 4 through SystemExit."""
import os
import sys

os.chdir(sys.argv[1])
raise SystemExit(4)
