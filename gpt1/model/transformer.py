"""GPT-1's Transformer decoder (Radford et al. 2018, §3.1 and §4.1), readable beside the paper.

Post-LN blocks (LayerNorm after each residual sum), tanh-approximated GELU, learned position
embeddings, an LM head tied to the token embedding, dropout on embeddings, attention and
residuals, and N(0, 0.02) initialisation. Parameter names follow HuggingFace's `openai-gpt`
(`tokens_embed`, `h.0.attn.c_attn`, ...); our projections are `nn.Linear` (out, in), where HF's
`Conv1D` stores (in, out).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import get_type_hints

import torch
import torch.nn.functional as F
from torch import nn

from gpt1.model.dropout import Dropout, dropout
from gpt1.model.lm_loss import linear_cross_entropy


@dataclass(frozen=True)
class GPT1Config:
    vocab_size: int
    n_ctx: int = 512
    n_embd: int = 768
    n_layer: int = 12
    n_head: int = 12
    embd_pdrop: float = 0.1
    attn_pdrop: float = 0.1
    resid_pdrop: float = 0.1
    layer_norm_epsilon: float = 1e-5
    initializer_range: float = 0.02

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> GPT1Config:
        """Read a config written by `save`; ValueError names the file and the key at fault."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ValueError(f"{path}: not JSON ({err})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: expected a JSON object, found {type(data).__name__}")
        types = get_type_hints(cls)
        if missing := sorted(types.keys() - data.keys()):
            raise ValueError(f"{path}: missing keys {missing}")
        if unknown := sorted(data.keys() - types.keys()):
            raise ValueError(f"{path}: unknown keys {unknown}")
        for key, kind in types.items():
            value, least = data[key], 1 if kind is int else 0
            allowed = (int,) if kind is int else (int, float)  # type(), as a bool is no number
            if type(value) not in allowed or value < least:
                raise ValueError(f"{path}: {key}={value!r}, expected "
                                 f"{'an integer' if kind is int else 'a number'} >= {least}")
        if data["n_embd"] % data["n_head"]:
            raise ValueError(f"{path}: n_head={data['n_head']} does not divide "
                             f"n_embd={data['n_embd']}")
        return cls(**{key: kind(data[key]) for key, kind in types.items()})


def _causal_attention_with_dropout(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                   p: float) -> torch.Tensor:
    """What `scaled_dot_product_attention(..., is_causal=True, dropout_p=p)` computes on the CPU
    (its CPU kernels cannot drop weights, so it falls back to these steps), with the weights'
    dropout mask drawn by `gpt1.model.dropout`."""
    t = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
    future = torch.ones(t, t, dtype=torch.bool, device=q.device).triu_(1)
    weights = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
    return dropout(weights, p, training=True) @ v


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPT1Config) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.attn_pdrop = cfg.attn_pdrop
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)
        self.resid_dropout = Dropout(cfg.resid_pdrop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        if self.training and self.attn_pdrop > 0 and x.device.type == "cpu":
            y = _causal_attention_with_dropout(q, k, v, self.attn_pdrop)
        else:
            y = F.scaled_dot_product_attention(
                q, k, v, is_causal=True, dropout_p=self.attn_pdrop if self.training else 0.0)
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, cfg: GPT1Config) -> None:
        super().__init__()
        self.c_fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.c_proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd)
        self.dropout = Dropout(cfg.resid_pdrop)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")))


class Block(nn.Module):
    """Post-LN: n = LN(x + attn(x)); h = LN(n + mlp(n))."""

    def __init__(self, cfg: GPT1Config) -> None:
        super().__init__()
        self.attn = CausalSelfAttention(cfg)
        self.ln_1 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)
        self.mlp = MLP(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd, eps=cfg.layer_norm_epsilon)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = self.ln_1(x + self.attn(x))
        return self.ln_2(n + self.mlp(n))


class GPT1(nn.Module):
    """The decoder trunk; `lm_logits` is the tied language-modelling head."""

    def __init__(self, cfg: GPT1Config) -> None:
        super().__init__()
        self.config = cfg
        self.tokens_embed = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.positions_embed = nn.Embedding(cfg.n_ctx, cfg.n_embd)
        self.drop = Dropout(cfg.embd_pdrop)
        self.h = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear | nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=self.config.initializer_range)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Hidden states (B, T, n_embd) for token ids (B, T), T <= n_ctx."""
        t = input_ids.shape[1]
        if t > self.config.n_ctx:
            raise ValueError(f"sequence length {t} exceeds n_ctx {self.config.n_ctx}")
        positions = torch.arange(t, device=input_ids.device)
        x = self.drop(self.tokens_embed(input_ids) + self.positions_embed(positions))
        for block in self.h:
            x = block(x)
        return x

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """Next-token logits through the LM head tied to the token embedding."""
        return F.linear(hidden, self.tokens_embed.weight)

    def lm_loss(self, input_ids: torch.Tensor, targets: torch.Tensor,
                ignore_index: int = -100) -> torch.Tensor:
        """Mean cross-entropy of predicting `targets` (B, T) from `input_ids` (B, T)."""
        return self.lm_head_loss(self(input_ids), targets, ignore_index)

    def lm_head_loss(self, hidden: torch.Tensor, targets: torch.Tensor,
                     ignore_index: int = -100) -> torch.Tensor:
        """Mean cross-entropy of `targets` (...) under `lm_logits(hidden)` (..., n_embd), computed
        without the full logits (`gpt1.model.lm_loss`)."""
        return linear_cross_entropy(hidden, self.tokens_embed.weight, targets, ignore_index)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def save_safetensors(tensors: dict[str, torch.Tensor], path: Path) -> None:
    """Write `tensors` (moved to the CPU) as a safetensors file with the usual file mode.

    The bytes are written here rather than by `safetensors.torch.save_file`, whose file is mode
    0600: a model shared on a multi-user machine must be readable by the others.
    """
    from safetensors.torch import save

    cpu = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    path.write_bytes(save(cpu, metadata={"format": "pt"}))


def save_model(model: GPT1, out_dir: Path) -> None:
    """`config.json` + `model.safetensors` (the tied LM head is the token embedding)."""
    model.config.save(out_dir / "config.json")
    save_safetensors(model.state_dict(), out_dir / "model.safetensors")


def load_safetensors(path: Path, device: str = "cpu") -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file; ValueError, naming it, when it is cut short or garbled."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(str(path), device=device)
    except SafetensorError as err:
        raise ValueError(f"{path}: not a readable safetensors file ({err})") from None


def load_model(model_dir: Path, map_location: str | torch.device = "cpu") -> GPT1:
    """Rebuild a model saved by `save_model`; loading executes no code (safetensors + JSON)."""
    config_path, weights_path = model_dir / "config.json", model_dir / "model.safetensors"
    for path in (config_path, weights_path):
        if not path.is_file():
            raise FileNotFoundError(f"{path}: not found (run the pretrain stage first)")
    model = GPT1(GPT1Config.load(config_path))
    state = load_safetensors(weights_path, device=str(map_location))
    expected = model.state_dict()
    if state.keys() != expected.keys():
        missing, extra = sorted(expected.keys() - state.keys()), sorted(state.keys() - expected)
        hint = ("; a fine-tuned classifier keeps its trunk under 'trunk.'"
                if any(key.startswith("trunk.") for key in extra) else "")
        raise ValueError(f"{weights_path}: not the GPT-1 trunk {config_path.name} describes "
                         f"({len(missing)} weights missing, e.g. {missing[:2]}; {len(extra)} "
                         f"unexpected, e.g. {extra[:2]}){hint}")
    for key, tensor in expected.items():
        if state[key].shape != tensor.shape:
            raise ValueError(f"{weights_path}: {key} has shape {tuple(state[key].shape)}, but "
                             f"{config_path.name} makes it {tuple(tensor.shape)}")
    model.load_state_dict(state)
    return model
