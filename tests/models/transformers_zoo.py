"""Hugging Face transformers models built from small configs with random weights (nothing
is downloaded): one table, each entry a model type, the class to build and the inputs to
call it with. Used by tests/python/test_transformers_models.py and the model sweeps."""

import dataclasses
import typing

# Sizes small enough for a 2-core machine, shared by every text model. Configs map the
# common names onto their own (GPT-2's n_embd, T5's d_model, ...) through attribute_map.
TEXT_SIZES = dict(
    vocab_size=128,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=64,
    max_position_embeddings=64,
    # Special tokens inside the small vocabulary.
    pad_token_id=0,
    bos_token_id=1,
    eos_token_id=2,
    decoder_start_token_id=0,
)
SEQUENCE = 8
BATCH = 2


@dataclasses.dataclass(frozen=True)
class ZooEntry:
    name: str
    model_type: str  # transformers' config model_type
    kind: str  # "causal_lm", "encoder", "seq2seq", "vision", "audio", ...
    overrides: dict = dataclasses.field(default_factory=dict)
    generates: bool = False  # whether a 5-token generate() with the KV cache applies


def _causal(name, model_type, **overrides):
    return ZooEntry(name, model_type, "causal_lm", overrides, generates=True)


ENTRIES = [
    # The causal LMs the issue names, then more of the library's own.
    _causal("gpt2", "gpt2"),
    _causal("llama", "llama", head_dim=8),
    _causal("mistral", "mistral", head_dim=8, sliding_window=None),
    _causal("qwen2", "qwen2"),
    _causal("gemma", "gemma", head_dim=8),
    _causal("phi", "phi"),
    _causal("gpt_neox", "gpt_neox"),
    _causal("opt", "opt", word_embed_proj_dim=32, ffn_dim=64),
    _causal("falcon", "falcon", new_decoder_architecture=False, multi_query=True),
    _causal("gpt_neo", "gpt_neo", attention_types=[[["global", "local"], 1]], window_size=4),
    _causal("gptj", "gptj", rotary_dim=4, n_positions=64),
    _causal("bloom", "bloom"),
    _causal("codegen", "codegen", rotary_dim=4, n_ctx=64, n_positions=64),
    _causal("qwen3", "qwen3", head_dim=8),
    _causal("gemma2", "gemma2", head_dim=8),
    _causal("phi3", "phi3", pad_token_id=0),
    _causal("stablelm", "stablelm"),
    _causal("olmo", "olmo"),
    _causal("starcoder2", "starcoder2"),
    _causal("granite", "granite"),
    _causal("mixtral", "mixtral", num_local_experts=4, num_experts_per_tok=2),
    _causal("cohere", "cohere"),
    _causal("biogpt", "biogpt"),
    _causal("xglm", "xglm"),
    # Encoders.
    ZooEntry("bert", "bert", "encoder"),
    ZooEntry("roberta", "roberta", "encoder"),
    ZooEntry("distilbert", "distilbert", "encoder", {"dim": 32, "hidden_dim": 64, "n_heads": 4}),
    ZooEntry("clip_text", "clip_text_model", "encoder"),
    # Encoder-decoders.
    ZooEntry("t5", "t5", "seq2seq", {"d_kv": 8, "d_ff": 64, "num_decoder_layers": 2},
             generates=True),
    ZooEntry("bart", "bart", "seq2seq", {"encoder_layers": 2, "decoder_layers": 2,
                                         "encoder_attention_heads": 4,
                                         "decoder_attention_heads": 4, "d_model": 32,
                                         "encoder_ffn_dim": 64, "decoder_ffn_dim": 64},
             generates=True),
    # Vision and audio.
    ZooEntry("vit", "vit", "vision", {"image_size": 32, "patch_size": 8}),
    ZooEntry("clip_vision", "clip_vision_model", "vision", {"image_size": 32, "patch_size": 8}),
    ZooEntry("whisper", "whisper", "speech_seq2seq",
             {"d_model": 32, "encoder_layers": 2, "decoder_layers": 2,
              "encoder_attention_heads": 4, "decoder_attention_heads": 4,
              "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "num_mel_bins": 16,
              "max_source_positions": 16, "max_target_positions": 32,
              "suppress_tokens": [], "begin_suppress_tokens": []}, generates=True),
    ZooEntry("wav2vec2", "wav2vec2", "audio",
             {"conv_dim": (8, 8), "conv_stride": (4, 4), "conv_kernel": (8, 8),
              "num_conv_pos_embeddings": 8, "num_conv_pos_embedding_groups": 2}),
]

NAMES = [e.name for e in ENTRIES]


def entry(name) -> ZooEntry:
    for e in ENTRIES:
        if e.name == name:
            return e
    raise ValueError(f"unknown transformers model {name!r}")


def build(name):
    """The model `name`, seeded, in eval mode."""
    import torch
    import transformers

    e = entry(name)
    sizes = dict(TEXT_SIZES)
    sizes.update(e.overrides)
    config = transformers.AutoConfig.for_model(e.model_type, **sizes)
    config.use_cache = True
    torch.manual_seed(0)
    classes = {
        "causal_lm": transformers.AutoModelForCausalLM,
        "seq2seq": transformers.AutoModelForSeq2SeqLM,
        "speech_seq2seq": transformers.AutoModelForSpeechSeq2Seq,
    }
    cls = classes.get(e.kind, transformers.AutoModel)
    if e.model_type == "clip_text_model":
        cls = transformers.CLIPTextModel
    elif e.model_type == "clip_vision_model":
        cls = transformers.CLIPVisionModel
    if hasattr(cls, "from_config"):  # an Auto class
        model = cls.from_config(config)
    else:
        model = cls(config)
    return model.eval()


def inputs(name, model, seed=0):
    """Keyword arguments of one forward call of `model`."""
    import torch

    e = entry(name)
    gen = torch.Generator().manual_seed(seed)
    config = model.config
    vocab = getattr(config, "vocab_size", 128)
    ids = torch.randint(3, vocab, (BATCH, SEQUENCE), generator=gen)
    if e.kind in ("causal_lm", "encoder"):
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    if e.kind == "seq2seq":
        return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                "decoder_input_ids": ids[:, :4]}
    if e.kind == "vision":
        size = config.image_size
        return {"pixel_values": torch.randn(BATCH, 3, size, size, generator=gen)}
    if e.kind == "speech_seq2seq":
        frames = 2 * config.max_source_positions
        return {"input_features": torch.randn(BATCH, config.num_mel_bins, frames, generator=gen),
                "decoder_input_ids": ids[:, :4] % config.vocab_size}
    if e.kind == "audio":
        return {"input_values": torch.randn(BATCH, 400, generator=gen)}
    raise ValueError(e.kind)


def generate_inputs(name, model, seed=0) -> typing.Optional[dict]:
    """Keyword arguments of a 5-token greedy generate() with the KV cache, or None."""
    e = entry(name)
    if not e.generates:
        return None
    args = inputs(name, model, seed)
    args.pop("decoder_input_ids", None)
    args.update(max_new_tokens=5, do_sample=False, use_cache=True, num_beams=1)
    config = model.generation_config
    if config.pad_token_id is None:
        args["pad_token_id"] = 0
    return args


def outputs_as_tensors(output):
    """The tensors of a model output (ModelOutput, tuple, cache objects skipped), in order."""
    import torch

    if isinstance(output, torch.Tensor):
        return [output]
    if hasattr(output, "to_tuple"):
        output = output.to_tuple()
    tensors = []
    if isinstance(output, (tuple, list)):
        for item in output:
            tensors.extend(outputs_as_tensors(item))
    return tensors
