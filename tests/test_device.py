"""One device rule for every model (irbook.course.search.dense.pick_device), and caches
that do not depend on the device. torch's availability functions are monkeypatched, so
the GPU branches are checked on a CPU-only machine."""

import numpy as np
import pytest
import torch

from irbook.course.search.dense import (
    DEVICE_ENV,
    MINILM,
    DenseRetriever,
    EmbeddingCache,
    Encoder,
    pick_device,
)


def machine(monkeypatch, cuda: int = 0, mps: bool = False):
    "Pretend this machine has `cuda` GPUs and/or Apple's mps."
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)


@pytest.fixture(autouse=True)
def no_env(monkeypatch):
    monkeypatch.delenv(DEVICE_ENV, raising=False)


# ---- the rule: asked, else IRBOOK_DEVICE, else cuda, mps, cpu
# -------------------------------------------------------------------
@pytest.mark.parametrize(
    "cuda, mps, expected",
    [(1, False, "cuda"), (2, True, "cuda"), (0, True, "mps"), (0, False, "cpu")],
)
def test_rule_order(monkeypatch, cuda, mps, expected):
    machine(monkeypatch, cuda, mps)
    assert pick_device() == expected


def test_env_overrides_the_rule_and_the_argument_overrides_the_env(monkeypatch):
    machine(monkeypatch, cuda=2)
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    assert pick_device() == "cpu"  # a GPU machine kept on the CPU
    monkeypatch.setenv(DEVICE_ENV, " CUDA:1 ")
    assert pick_device() == "cuda:1"
    assert pick_device("cuda:0") == "cuda:0"  # an explicit argument wins
    monkeypatch.setenv(DEVICE_ENV, "")
    assert pick_device() == "cuda"  # empty: unset
    assert pick_device(torch.device("cpu")) == "cpu"


def test_unknown_or_absent_device_is_refused_with_what_is_here(monkeypatch):
    machine(monkeypatch, cuda=0)
    with pytest.raises(ValueError, match="'tpu' is not a device.*available here: cpu"):
        pick_device("tpu")
    with pytest.raises(ValueError, match="not available here: available are cpu$"):
        pick_device("cuda")
    with pytest.raises(ValueError, match="mps"):
        pick_device("mps")
    monkeypatch.setenv(DEVICE_ENV, "gpu")
    with pytest.raises(ValueError, match=f"^{DEVICE_ENV}='gpu' is not a device"):
        pick_device()
    machine(monkeypatch, cuda=2)
    monkeypatch.delenv(DEVICE_ENV)
    with pytest.raises(ValueError, match="available are cpu, cuda, cuda:0, cuda:1$"):
        pick_device("cuda:2")
    with pytest.raises(ValueError, match="not a device"):
        Encoder(MINILM, device="tpu")  # refused when built, not at the first encode


# ---- every model path goes through the rule
# ---------------------------------------------------------------------
class Recorder:
    "Stands for a model class: records where it was asked to load."

    calls = []

    def __init__(self, name, *args, device=None, **kw):
        Recorder.calls.append((name, device))


def test_retriever_with_no_device_uses_the_rule(monkeypatch):
    import sentence_transformers

    machine(monkeypatch, cuda=0, mps=True)
    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", Recorder)
    Recorder.calls = []
    DenseRetriever(MINILM, cache=False).encoder.model()
    DenseRetriever(MINILM, cache=False, device="cpu").encoder.model()
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    Encoder(MINILM, cache=False).model()
    assert [d for _, d in Recorder.calls] == ["mps", "cpu", "cpu"]


def test_colbert_loaders_use_the_rule(monkeypatch, tmp_path):
    models = pytest.importorskip("pylate.models")
    from irbook.course.search.colbert import load_colbert, new_colbert

    machine(monkeypatch, cuda=1)
    monkeypatch.setattr(models, "ColBERT", Recorder)
    Recorder.calls = []
    new_colbert()
    load_colbert(str(tmp_path))
    load_colbert(str(tmp_path), device="cpu")
    assert [d for _, d in Recorder.calls] == ["cuda", "cuda", "cpu"]


def test_real_model_loads_where_the_rule_says():
    m = DenseRetriever(MINILM, cache=False).encoder.model()
    assert m.device.type == pick_device().split(":")[0]


# ---- caches are keyed by content, model and settings, never by device
# ---------------------------------------------------------------
def test_embedding_cache_key_is_the_same_on_every_device(monkeypatch, tmp_path):
    machine(monkeypatch, cuda=1)
    cpu = Encoder(MINILM, cache_root=tmp_path, device="cpu")
    gpu = Encoder(MINILM, cache_root=tmp_path, device="cuda")
    rule = Encoder(MINILM, cache_root=tmp_path)
    assert cpu.id == gpu.id == rule.id == MINILM
    assert cpu.cache.path == gpu.cache.path == rule.cache.path
    # a vector stored by a CPU run is what a GPU run finds (no encoding: no model)
    k = EmbeddingCache.key("a text")
    cpu.cache.put({k: np.ones(3, dtype=np.float32)})
    np.testing.assert_array_equal(gpu.encode(["a text"])[0], np.ones(3))
    assert (gpu.hits, gpu.misses, gpu._model) == (1, 0, None)


def test_model_settings_hold_no_device():
    from irbook.course.finetune import FinetuneSettings
    from irbook.course.search.colbert import ColBERTSettings

    for s in (ColBERTSettings(), FinetuneSettings()):
        assert not any("device" in f for f in s.fields())


def test_colbert_index_key_is_the_same_on_every_device(monkeypatch, tmp_path):
    models = pytest.importorskip("pylate.models")
    from irbook.course.search.colbert import ColBERTRetriever, load_colbert, new_colbert

    folder = tmp_path / "m"
    new_colbert(seed=0, device="cpu").save(str(folder))
    real = models.ColBERT

    def on_cpu(name, device=None, **kw):  # a "GPU" load that really is on the CPU
        return real(name, device="cpu", **kw)

    machine(monkeypatch, cuda=1)
    monkeypatch.setattr(models, "ColBERT", on_cpu)
    docs = ["The learning rate finder plots loss.", "Cats and dogs."]
    keys = []
    for device in ("cpu", "cuda", None):
        r = ColBERTRetriever(load_colbert(str(folder), device=device), progress=False)
        r.ids = ["a", "b"]
        keys.append(r._index_key(docs))
    assert keys[0] and keys[0] == keys[1] == keys[2]


def test_stand_in_built_on_cpu_is_reused_on_gpu(monkeypatch, tmp_path):
    pytest.importorskip("pylate")
    from irbook.course.search.colbert import ColBERTSettings, offline_colbert
    from irbook.data import MARKER

    tiny = ColBERTSettings(chapters=(1,), n_pairs=16, batch_size=8, steps=3)
    f = offline_colbert(tiny, root=tmp_path / "m", progress=False, device="cpu")
    stamp = (f / MARKER).stat().st_mtime_ns
    machine(monkeypatch, cuda=1)  # a rebuild would now fail: there is no real GPU
    assert offline_colbert(tiny, root=f, progress=False, device="cuda") == f
    assert offline_colbert(tiny, root=f, progress=False) == f  # the rule says cuda
    assert (f / MARKER).stat().st_mtime_ns == stamp


@pytest.mark.slow  # training: `make test-slow`
def test_finetuned_model_built_on_cpu_is_reused_on_gpu(monkeypatch, tmp_path):
    pytest.importorskip("datasets")
    from irbook.course.finetune import FinetuneSettings, finetuned_model, training_log
    from irbook.data import MARKER

    tiny = FinetuneSettings(max_pairs=16, batch_size=8, max_seq_length=32)
    f = finetuned_model(tiny, root=tmp_path / "ft", progress=False, device="cpu")
    assert training_log(f)["device"] == "cpu"
    stamp = (f / MARKER).stat().st_mtime_ns
    machine(monkeypatch, cuda=1)
    assert finetuned_model(tiny, root=f, progress=False, device="cuda") == f
    assert (f / MARKER).stat().st_mtime_ns == stamp


def test_finetune_refuses_a_gpu_the_trainer_cannot_pick(monkeypatch, tmp_path):
    pytest.importorskip("datasets")
    import pandas as pd

    from irbook.course.finetune import FinetuneSettings, train

    machine(monkeypatch, cuda=2)
    pairs = pd.DataFrame({"anchor": ["a", "b"], "positive": ["c", "d"]})
    with pytest.raises(ValueError, match="CUDA_VISIBLE_DEVICES=1"):
        train(FinetuneSettings(), pairs, tmp_path / "m", device="cuda:1")
