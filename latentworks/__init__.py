"""latentworks: the `latentworks` command line (router + the one dataclass-to-argparse builder).

The toolkit itself lives in the sibling packages: `latent` (hidden states), `agents` (LatentMAS),
`eval` (benchmark harness), `finetune`, `probes` and `families`. Importing this package is instant.
"""

__version__ = "0.1.0"
