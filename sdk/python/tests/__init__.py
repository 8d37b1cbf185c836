"""The SDK's tests. Run them with either of

    python3 -m unittest discover -s sdk/python/tests        # from the repository's root
    python3 -m unittest discover -s tests -t .              # from sdk/python (as test/e2e does)

The modules import each other by their plain names (harness, fakeserver, live), so this
directory is put on sys.path whichever way they were found.
"""

import os
import sys

_here = os.path.dirname(os.path.abspath(__file__))
if _here not in sys.path:
    sys.path.insert(0, _here)
