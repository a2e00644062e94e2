"""Configuration of the MemExplainer family (one dataclass, validated on construction)."""

from __future__ import annotations

from dataclasses import dataclass, field

_SELECTIONS = ("kl", "topk", "relaxed")
_TASKS = ("flag", "dormancy")


@dataclass
class MemExplainerConfig:
    """Hyper-parameters of the TGN, its training, the explainer and the synthetic event streams.

    The TGN is deliberately small (memory 16, one attention layer) because the demo streams are tiny
    (8 nodes, 20 events each); the paper's models use memory 100-172 on real graphs.

    Example:
        >>> cfg = MemExplainerConfig(memory_dim=8, num_neighbors=3)
        >>> cfg.message_dim  # [memory_src, memory_dst, raw event features, time encoding]
        28
    """

    # Parameters of the TGN (torch_geometric TGNMemory + TransformerConv + MLP decoder)
    memory_dim: int = field(default=16, metadata={"help": "Size of each node's memory vector (GRU state)."})
    time_dim: int = field(default=8, metadata={"help": "Size of the cosine time encoding."})
    raw_msg_dim: int = field(default=4, metadata={"help": "Size of the raw event features."})
    hidden_size: int = field(default=8, metadata={"help": "Per-head width of the attention embedding."})
    num_attention_heads: int = field(default=2, metadata={"help": "Heads of the TransformerConv layer."})
    decoder_hidden_size: int = field(default=16, metadata={"help": "Hidden width of the decoder MLP."})
    num_neighbors: int = field(
        default=4,  # the trigger is planted further back than this, so attention alone cannot see it
        metadata={"help": "Size of the LastNeighborLoader window (most recent events per node)."},
    )
    # Parameters of the synthetic event streams (see data.py)
    nodes_per_stream: int = field(default=8, metadata={"help": "Nodes in each independent stream."})
    stream_length: int = field(default=20, metadata={"help": "Events per stream (one per time step)."})
    target_event_prob: float = field(
        default=0.55, metadata={"help": "Probability that a step's event involves the query node."}
    )
    decoy_prob: float = field(
        default=0.15, metadata={"help": "Probability that a non-query event carries the trigger flag."}
    )
    task: str = field(
        default="flag",
        metadata={
            "help": "'flag' (the trigger is a flagged query-node event) or 'dormancy' (the trigger is the "
            "query-node event that ends a long silence; flags are label-free noise)."
        },
    )
    dormancy_gap: int = field(
        default=8, metadata={"help": "Steps of query-node silence before the trigger ('dormancy' task)."}
    )
    # Parameters of training
    train_steps: int = field(default=300, metadata={"help": "Adam steps over mini-batches of streams."})
    batch_size: int = field(default=64, metadata={"help": "Streams per mini-batch."})
    lr: float = field(default=1e-2, metadata={"help": "Adam learning rate."})
    seed: int = field(default=0, metadata={"help": "Seed for data, initialisation and batch order."})
    # Parameters of the explainer
    max_depth: int | None = field(
        default=None,  # None = the full memory backtracking tree; 0 = topology tree only
        metadata={"help": "Memory updates to backtrack from each memory vector (None = all)."},
    )
    selection: str = field(
        default="kl",
        metadata={
            "help": "'kl' (exact KL-optimal subset), 'relaxed' (the reference code's convex relaxation) or 'topk'."
        },
    )
    include_bias: bool = field(
        default=True,  # the paper's objective has no bias term because its LRP rule absorbs biases
        metadata={"help": "Use sigmoid(b + sum c_S) (True) or sigmoid(sum c_S) in the KL objective."},
    )
    exhaustive_limit: int = field(
        default=20000, metadata={"help": "Enumerate all k-subsets up to this many; else HiGHS MILP."}
    )

    @property
    def message_dim(self) -> int:
        """Width of an identity message [s_src, s_dst, raw_msg, time_enc] fed to the GRU."""
        return 2 * self.memory_dim + self.raw_msg_dim + self.time_dim

    def __post_init__(self) -> None:
        problems = []
        positive = (
            "memory_dim",
            "time_dim",
            "hidden_size",
            "num_attention_heads",
            "decoder_hidden_size",
            "num_neighbors",
            "train_steps",
            "batch_size",
            "exhaustive_limit",
        )
        for name in positive:
            if getattr(self, name) < 1:
                problems.append(f"`{name}` must be >= 1, got {getattr(self, name)}.")
        if self.raw_msg_dim < 2:
            problems.append(f"`raw_msg_dim` must be >= 2 (noise + trigger flag), got {self.raw_msg_dim}.")
        if self.nodes_per_stream < 3:
            problems.append(f"`nodes_per_stream` must be >= 3, got {self.nodes_per_stream}.")
        if self.stream_length < self.num_neighbors + 3:
            problems.append(
                f"`stream_length` must be >= num_neighbors + 3 = {self.num_neighbors + 3} so a trigger can "
                f"sit outside the neighbour window, got {self.stream_length}."
            )
        for name in ("target_event_prob", "decoy_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                problems.append(f"`{name}` must lie in [0, 1], got {getattr(self, name)}.")
        if not 0.0 < self.target_event_prob:
            problems.append("`target_event_prob` must be > 0 so the query node has events.")
        if self.lr <= 0:
            problems.append(f"`lr` must be > 0, got {self.lr}.")
        if self.max_depth is not None and self.max_depth < 0:
            problems.append(f"`max_depth` must be None or >= 0, got {self.max_depth}.")
        if self.selection not in _SELECTIONS:
            problems.append(f"`selection` must be one of {_SELECTIONS}, got {self.selection!r}.")
        if self.task not in _TASKS:
            problems.append(f"`task` must be one of {_TASKS}, got {self.task!r}.")
        if self.dormancy_gap < 4:  # background gaps are 1-3 steps, so the silence must be longer
            problems.append(f"`dormancy_gap` must be >= 4, got {self.dormancy_gap}.")
        if problems:
            raise ValueError("Invalid MemExplainerConfig: " + " ".join(problems))
