"""The TRL environment_factory adapter: its tools, reset(**row) and get_reward(), and one real GRPOTrainer step.

The first tests need no trainer. The `trl`-marked ones need the extra `mle-gym[trl]` (TRL, transformers,
torch: several GB), so they are opt-in: they skip without it, and fail instead under MLE_GYM_REQUIRE_TRL=1
(the CI step that installs the extra sets it). The GRPO step uses a model built here (random weights from a
config), a tokenizer trained here and TRL's own Qwen3 chat template; a sequence bias makes the model write one
`<tool_call>` for list_dir and stop, so the call goes through TRL's own parsing and tool-calling loop.
"""

from __future__ import annotations

import inspect
import os
from typing import Any

import pytest

import mle_gym  # noqa: F401  (registers the envs)
from mle_gym.integrations.trl_env import MLEToolEnv, build_dataset, environment_factory
from mle_gym.tools.schemas import TOOL_ARGS, openai_tools

LOCAL = {"data": "sample", "sandbox": "local", "max_steps": 6}


def _trl(module: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        reason = f"{module} is not importable (install the extra mle-gym[trl]): {exc}"
        if os.environ.get("MLE_GYM_REQUIRE_TRL") == "1":
            pytest.fail(f"MLE_GYM_REQUIRE_TRL=1 but {reason}", pytrace=False)
        pytest.skip(reason)


def test_tools_are_the_tool_table_and_run_in_the_env() -> None:
    env = environment_factory(**LOCAL)()
    try:
        for name in TOOL_ARGS:
            method = getattr(env, name)
            assert list(inspect.signature(method).parameters) == list(TOOL_ARGS[name].model_fields)
            assert method.__doc__.startswith(next(t["function"]["description"] for t in openai_tools()
                                                  if t["function"]["name"] == name))
        assert "No episode is running" in env.list_dir()
        prompt = env.reset(prompt=[{"role": "user", "content": ""}], competition="aerial-cactus", seed=0)
        assert "submission" in prompt
        data, submission = env.last_info["paths"]["data"], env.last_info["submission_path"]
        assert env.bash(command="echo hi").startswith("hi")
        assert "bad arguments for bash: nonsense" in env.bash(command="ls", nonsense=1)  # the env's own error
        assert env.last_info["tool_error"]["type"] == "invalid_arguments"
        assert env.get_reward() == 0.0 and env.last_info["truncation_reason"] == "stopped_by_trainer"  # nothing on disk
        assert env.bash(command=f"cp {data}/sample_submission.csv {submission}").endswith("[exit code: 0]")
        assert "Submitted" in env.submit()
        assert env.last_info["grade"]["valid_submission"] is True
        assert env.get_reward() == 0.0  # a valid file, no medal: the terminal reward
        assert "episode is over" in env.bash(command="echo late")
        with pytest.raises(ValueError, match=r"the dataset row sets \['sandbox'\], which only the environment factory"):
            env.reset(competition="aerial-cactus", sandbox="docker")
    finally:
        MLEToolEnv.close_all()
    with pytest.raises(ValueError):
        environment_factory(sandbox="nowhere")


@pytest.mark.trl
def test_transformers_renders_the_tool_table_as_its_schemas() -> None:
    utils = _trl("transformers.utils")
    env = MLEToolEnv("mle/aerial-cactus", **LOCAL)
    for tool in openai_tools():
        fn = tool["function"]
        schema = utils.get_json_schema(getattr(env, fn["name"]))["function"]
        assert schema["name"] == fn["name"] and schema["description"] == fn["description"]
        assert set(schema["parameters"]["properties"]) == set(fn["parameters"]["properties"])
        assert set(schema["parameters"].get("required", [])) == set(fn["parameters"]["required"])
        for arg, prop in fn["parameters"]["properties"].items():
            assert schema["parameters"]["properties"][arg]["description"] == prop["description"]


def _tiny_model_and_tokenizer(call: str) -> tuple[Any, Any]:
    """A Qwen2-shaped model of random weights and a byte-level BPE tokenizer trained on a few lines, with TRL's
    Qwen3 chat template; `call` is one token of its own."""
    import importlib.resources

    torch = _trl("torch")
    tokenizers = _trl("tokenizers")
    transformers = _trl("transformers")
    template = (importlib.resources.files("trl") / "chat_templates" / "qwen3.jinja").read_text()
    specials = ["<|im_start|>", "<|im_end|>", "<|endoftext|>"]
    bpe = tokenizers.Tokenizer(tokenizers.models.BPE())
    bpe.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(vocab_size=600, special_tokens=specials,
                                             initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet())
    bpe.train_from_iterator([template, "system user assistant tool <tool_call> </tool_call> <tool_response>"], trainer)
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>",
                                                     pad_token="<|endoftext|>", chat_template=template)
    tokenizer.add_tokens([call])
    config = transformers.Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                      max_position_embeddings=8192, eos_token_id=tokenizer.eos_token_id,
                                      pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True)
    torch.manual_seed(0)
    return transformers.Qwen2ForCausalLM(config), tokenizer


@pytest.mark.trl
def test_one_grpo_step_calls_a_tool_through_trls_own_loop(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    trl = _trl("trl")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    call = '<tool_call>\n{"name": "list_dir", "arguments": {}}\n</tool_call>'
    model, tokenizer = _tiny_model_and_tokenizer(call)
    call_id, eos = tokenizer.convert_tokens_to_ids(call), tokenizer.eos_token_id
    args = trl.GRPOConfig(
        output_dir=str(tmp_path), per_device_train_batch_size=2, num_generations=2, max_completion_length=8,
        max_steps=1, use_cpu=True, bf16=False, report_to="none", logging_steps=1, save_strategy="no",
        max_tool_calling_iterations=1, dataloader_num_workers=0,
        # the call first, then the end of the turn: what a model that learned the format writes
        generation_kwargs={"sequence_bias": [[[call_id], 50.0], [[call_id, eos], 100.0]]})
    trainer = trl.GRPOTrainer(model=model, processing_class=tokenizer, args=args,
                              train_dataset=build_dataset(["aerial-cactus"], seeds=2),
                              environment_factory=environment_factory(**LOCAL))
    try:
        trainer.train()
        (logs, *_) = trainer.state.log_history
        assert logs["tools/call_frequency"] == 1.0 and logs["tools/failure_frequency"] == 0.0
        assert logs["rewards/MLEToolEnv/mean"] == 0.0  # graded on disk: nothing was written
        used = [e for e in trainer._environment_pool[None] if e._steps]
        assert len(used) == 2
        for env in used:
            assert env._steps == 1 and env.last_info["tool_calls"][0]["tool"] == "list_dir"
            assert env.last_info["grade"]["valid_submission"] is False
            assert env.last_info["truncation_reason"] == "stopped_by_trainer"
            assert env._env.unwrapped.competition.id == "aerial-cactus-identification"
    finally:
        MLEToolEnv.close_all()
