"""`python -m latentworks ...` == `latentworks ...` (so `accelerate launch -m latentworks eval ...` works)."""

from latentworks.cli import main

raise SystemExit(main())
