"""Bridges: latent hand-off across models, a trained map from one model's thoughts into another's input.

A latent thought is a realigned last-layer hidden state: an input embedding of the model that thought it
(width D_s). Another model (width D_r, perhaps another tokenizer and family) cannot read it as it is. A
`Bridge` maps it into the receiver's input-embedding space and rescales it to the receiver's mean
input-embedding norm (times a trained scale), so the receiver reads the sender's thoughts as positions of
input embeddings (`WorkingMemory.state_for(..., bridges=...)`). KV caches never cross models: a bridge
maps thoughts, not caches.

Initialisation: a ridge map between the two input-embedding tables over the token strings both
vocabularies hold (every token for one tokenizer, the shared pieces for two), so before training a
thought that stands for a token mixture in the sender lands near the same mixture in the receiver.

A bridge is saved as a directory (`bridge_config.json` + `bridge.safetensors`) that names its sender and
receiver by the names they were loaded by; `Bridge.from_pretrained(NAME)` finds it by name in the model
cache or beside the built-in models, as `load_model` finds a trained adapter.

Shapes: B = batch, L = thoughts, D_s / D_r = sender / receiver hidden size.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from torch import nn

from latent.catalogue import BRIDGE_CONFIG

if TYPE_CHECKING:
    from latent.model import LatentModel

BRIDGE_WEIGHTS = "bridge.safetensors"
FORMAT = "latentworks-bridge-v1"
KINDS = ("linear", "mlp")
MIN_SHARED_TOKENS = 64  # fewer shared token strings than this: the ridge init is noise, start orthogonal


class Bridge(nn.Module):
    """A trainable map from a sender's realigned thoughts (..., D_s) to a receiver's input embeddings (..., D_r).

    Args:
        sender_size (`int`): the sender's hidden size D_s.
        receiver_size (`int`): the receiver's hidden size D_r.
        sender (`str`, *optional*): the name the sender loads by (`load_model(sender)`).
        receiver (`str`, *optional*): the name the receiver loads by.
        kind (`str`, defaults to `"linear"`): `linear` (W x + b) or `mlp` (plus a residual MLP, zero at init).
        mlp_hidden (`int`, defaults to `0`): width of the MLP of an `mlp` bridge.
        target_norm (`float`, defaults to `1.0`): the receiver's mean input-embedding norm.

    Example:
        ```python
        from latent import load_model
        from latent.bridge import Bridge

        s, r = load_model("smollm2-135m-instruct"), load_model("qwen2.5-coder-0.5b-instruct")
        bridge = Bridge.from_models(s, r, "smollm2-135m-instruct", "qwen2.5-coder-0.5b-instruct")
        bridge.save_pretrained("my-bridge")                       # later: Bridge.from_pretrained("my-bridge")
        ```
    """

    def __init__(
        self,
        sender_size: int,
        receiver_size: int,
        sender: str = "",
        receiver: str = "",
        kind: str = "linear",
        mlp_hidden: int = 0,
        target_norm: float = 1.0,
    ) -> None:
        super().__init__()
        if kind not in KINDS:
            raise ValueError(f"unknown bridge kind {kind!r}: use one of {KINDS}.")
        if min(sender_size, receiver_size) < 1:
            raise ValueError(f"bridge sizes must be >= 1, got {sender_size} -> {receiver_size}.")
        if kind == "mlp" and mlp_hidden < 1:
            raise ValueError(f"an `mlp` bridge needs `mlp_hidden` >= 1, got {mlp_hidden}.")
        self.sender, self.receiver, self.kind = sender, receiver, kind
        self.sender_size, self.receiver_size = sender_size, receiver_size
        self.mlp_hidden = mlp_hidden if kind == "mlp" else 0
        self.linear = nn.Linear(sender_size, receiver_size)
        self.mlp: nn.Module | None = None
        if kind == "mlp":
            self.mlp = nn.Sequential(
                nn.Linear(receiver_size, mlp_hidden), nn.GELU(), nn.Linear(mlp_hidden, receiver_size)
            )
            nn.init.zeros_(self.mlp[2].weight)  # the residual branch starts at 0: the linear map at init
            nn.init.zeros_(self.mlp[2].bias)
        self.log_scale = nn.Parameter(torch.zeros(()))
        self.register_buffer("target_norm", torch.tensor(float(target_norm)))

    def forward(self, thoughts: torch.Tensor) -> torch.Tensor:
        """(B, L, D_s) sender thoughts -> (B, L, D_r) receiver input embeddings, at the receiver's norm."""
        y = self.linear(thoughts.to(self.linear.weight.dtype))
        if self.mlp is not None:
            y = y + self.mlp(y)
        norm = self.target_norm.to(y.dtype) * self.log_scale.exp()
        return y * (norm / y.norm(dim=-1, keepdim=True).clamp_min(1e-6))

    def check(self, sender: LatentModel, receiver: LatentModel) -> str | None:
        """Why this bridge cannot join `sender` to `receiver` (hidden sizes), or None when it can."""
        if sender.hidden_size != self.sender_size or receiver.hidden_size != self.receiver_size:
            return (
                f"it maps width {self.sender_size} -> {self.receiver_size} (trained for {self.sender!r} -> "
                f"{self.receiver!r}), the models have {sender.hidden_size} -> {receiver.hidden_size}"
            )
        return None

    # ------------------------------------------------------------------ building
    @classmethod
    def from_models(
        cls,
        sender: LatentModel,
        receiver: LatentModel,
        sender_name: str = "",
        receiver_name: str = "",
        kind: str = "linear",
        mlp_hidden: int = 0,
        lam: float = 1e-2,
    ) -> Bridge:
        """A bridge initialised at the ridge map between the two input-embedding tables over the token
        strings both vocabularies hold (orthogonal when they share fewer than `MIN_SHARED_TOKENS`)."""
        e_s, e_r = _embedding_table(sender), _embedding_table(receiver)  # (V_s, D_s), (V_r, D_r)
        bridge = cls(
            sender.hidden_size,
            receiver.hidden_size,
            sender_name or _name_of(sender),
            receiver_name or _name_of(receiver),
            kind,
            mlp_hidden,
            target_norm=float(e_r.norm(dim=-1).mean()),
        )
        rows_s, rows_r = shared_tokens(sender.tokenizer, receiver.tokenizer)
        with torch.no_grad():
            if len(rows_s) >= MIN_SHARED_TOKENS:
                x, y = e_s[rows_s].double(), e_r[rows_r].double()
                eye = torch.eye(x.shape[1], dtype=torch.float64)
                w = torch.linalg.solve(x.T @ x + lam * len(rows_s) * eye, x.T @ y)  # (D_s, D_r)
                bridge.linear.weight.copy_(w.T.float())
            else:
                nn.init.orthogonal_(bridge.linear.weight)
            bridge.linear.bias.zero_()
        return bridge.to(receiver.device)

    # ------------------------------------------------------------------ saving and loading
    def save_pretrained(self, directory: str | Path) -> Path:
        """Write `bridge_config.json` (sizes, kind, sender and receiver names) and the weights."""
        from safetensors.torch import save_file

        out = Path(directory)
        out.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.detach().float().cpu().contiguous() for k, v in self.state_dict().items()}
        save_file(tensors, str(out / BRIDGE_WEIGHTS), metadata={"format": FORMAT})
        (out / BRIDGE_CONFIG).write_text(json.dumps(self.settings(), indent=2) + "\n")
        return out

    def settings(self) -> dict:
        """What `bridge_config.json` holds: everything that rebuilds the module, and the two names."""
        return {
            "format": FORMAT,
            "sender": self.sender,
            "receiver": self.receiver,
            "sender_size": self.sender_size,
            "receiver_size": self.receiver_size,
            "kind": self.kind,
            "mlp_hidden": self.mlp_hidden,
        }

    @classmethod
    def from_pretrained(cls, name_or_path: str, device: str | torch.device = "cpu") -> Bridge:
        """A bridge saved by `save_pretrained`, by path or by name (model cache, or beside the built-ins)."""
        from safetensors.torch import load_file

        path = resolve_bridge_path(name_or_path)
        conf = read_bridge_config(name_or_path)
        bridge = cls(
            conf["sender_size"],
            conf["receiver_size"],
            conf.get("sender", ""),
            conf.get("receiver", ""),
            conf.get("kind", "linear"),
            conf.get("mlp_hidden", 0),
        )
        bridge.load_state_dict(load_file(str(path / BRIDGE_WEIGHTS)))
        return bridge.to(device)


def resolve_bridge_path(name_or_path: str) -> Path:
    """The directory of a bridge: a path, a name in the model cache, or a name beside the built-in models."""
    from latent.catalogue import BUILTIN_DIR, cache_dir

    name = str(name_or_path)
    candidates = [Path(os.path.expanduser(name))]
    if "/" not in name and name:
        candidates += [cache_dir() / "models" / name, BUILTIN_DIR / name]
    for c in candidates:
        if (c / BRIDGE_CONFIG).is_file():
            return c
    raise FileNotFoundError(
        f"no bridge {name!r}: not a directory holding {BRIDGE_CONFIG}, nor a bridge saved in the model cache "
        f"({cache_dir() / 'models'}) or shipped with latentworks. Train one with `latentworks finetune mas "
        "--sender SENDER --base RECEIVER --name NAME`, or copy its directory into the model cache."
    )


def read_bridge_config(name_or_path: str) -> dict:
    """The settings of a saved bridge (no weights read): what a graph is checked against before loading."""
    conf = json.loads((resolve_bridge_path(name_or_path) / BRIDGE_CONFIG).read_text())
    if conf.get("format") != FORMAT:
        raise ValueError(
            f"{name_or_path!r} is not a latentworks bridge (format {conf.get('format')!r}); write one with "
            "Bridge.save_pretrained."
        )
    return conf


def shared_tokens(tok_s, tok_r) -> tuple[list[int], list[int]]:
    """Ids (sender, receiver) of the token strings both vocabularies hold, special tokens left out."""
    vs, vr = tok_s.get_vocab(), tok_r.get_vocab()
    special = set(tok_s.all_special_tokens) | set(tok_r.all_special_tokens)
    both = sorted(t for t in vs.keys() & vr.keys() if t not in special)
    return [vs[t] for t in both], [vr[t] for t in both]


def _embedding_table(model: LatentModel) -> torch.Tensor:
    """(V, D) input embeddings as the model feeds them (scaling inside the module included), fp32 on CPU."""
    emb = model.model.get_input_embeddings()
    with torch.no_grad():
        n = emb.weight.shape[0]
        ids = torch.arange(n, device=emb.weight.device)
        return torch.cat([emb(ids[None, i : i + 8192])[0].float().cpu() for i in range(0, n, 8192)])


def _name_of(model: LatentModel) -> str:
    return str(getattr(model.model, "name_or_path", "") or "")
