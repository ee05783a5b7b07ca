"""``python -m agentflow.cli``: the same as the ``agentflow`` console script."""

from __future__ import annotations

import sys

from agentflow.cli import main

sys.exit(main())
