"""SFT: the chat template masks everything but the answers, packing never splits a conversation, malformed
turns are named by line, the leak check finds template markers in the pretraining corpus."""
import json

import pytest
import torch
import torch.nn.functional as F

from scratchlm.data.jsonl import write_jsonl
from scratchlm.errors import UserError
from scratchlm.model.checkpoint import load_model
from scratchlm.sft.data import encode_conversations, pack_rows, read_conversations
from scratchlm.sft.leak import scan_for_markers
from scratchlm.sft.template import chat_ids
from scratchlm.tokenizer.bpe import PAD
from ship_fixtures import make_checkpoint


@pytest.fixture(scope="module")
def model_and_tok(tmp_path_factory):
    model, tok, _ = load_model(make_checkpoint(tmp_path_factory.mktemp("ck")))
    return model, tok


def test_mask_covers_exactly_the_answers(model_and_tok):
    _, tok = model_and_tok
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "add two numbers"},
            {"role": "assistant", "content": "def add(a, b):"}, {"role": "user", "content": "and print"},
            {"role": "assistant", "content": "print(i)"}]
    ids, mask = chat_ids(tok, msgs)
    trained = [i for i, m in zip(ids, mask) if m]
    end = tok.token_to_id("<|end|>")
    answers = tok.encode("def add(a, b):", add_special_tokens=False).ids + [end]
    answers += tok.encode("print(i)", add_special_tokens=False).ids + [end]
    assert trained == answers
    assert tok.decode([i for i, m in zip(ids, mask) if not m], skip_special_tokens=True) == \
        "Be brief.add two numbersand print"


def test_loss_counts_only_masked_targets(model_and_tok):
    model, tok = model_and_tok
    convs = [[{"role": "user", "content": f"question {i}"}, {"role": "assistant", "content": f"answer {i * 7}"}]
             for i in range(6)]
    ids, mask, dropped = pack_rows(encode_conversations(tok, convs), 65, tok.token_to_id(PAD))
    assert dropped == 0 and len(ids) < len(convs)  # packed several per row
    x, y, m = ids[:, :-1], ids[:, 1:], mask[:, 1:]
    logits, _ = model(x)
    _, loss = model(x, y, loss_mask=m)
    per_token = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="none")
    assert torch.allclose(loss, per_token[m.reshape(-1).bool()].mean())
    # Changing a prompt token's target changes nothing; changing an answer token's target changes the loss.
    y2 = y.clone()
    prompt_pos = ((m == 0) & (y != tok.token_to_id(PAD))).nonzero()[3]
    y2[tuple(prompt_pos)] = (y2[tuple(prompt_pos)] + 1) % model.vocab_size
    assert torch.equal(model(x, y2, loss_mask=m)[1], loss)
    answer_pos = m.nonzero()[0]
    y2[tuple(answer_pos)] = (y2[tuple(answer_pos)] + 1) % model.vocab_size
    assert not torch.equal(model(x, y2, loss_mask=m)[1], loss)


def test_packing_never_splits_and_drops_what_cannot_fit():
    examples = [([1] * 30, [0] * 30), ([2] * 30, [1] * 30), ([3] * 80, [1] * 80), ([4] * 10, [1] * 10)]
    ids, mask, dropped = pack_rows(examples, 64, pad_id=0)
    assert dropped == 1
    assert ids[0].tolist() == [1] * 30 + [2] * 30 + [0] * 4
    assert ids[1].tolist()[:10] == [4] * 10 and mask[1].sum() == 10


@pytest.mark.parametrize("line, needle", [
    ('{"messages": [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]}', "expected `assistant`"),
    ('{"messages": [{"role": "user", "content": "a"}]}', "last turn"),
    ('{"messages": [{"role": "bot", "content": "a"}]}', "needs a role"),
    ('{"prompt": "a"}', "needs `messages`"),
    ('{"prompt": "a", "response": ""}', "empty"),
    ('not json', "invalid JSON"),
])
def test_malformed_turns_name_the_line(tmp_path, line, needle):
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"prompt": "ok", "response": "fine"}) + "\n" + line + "\n")
    with pytest.raises(UserError, match=f"line 2.*{needle}"):
        read_conversations(path)


def test_leak_check_reports_where_markers_occur(tmp_path):
    (tmp_path / "train").mkdir()
    write_jsonl(tmp_path / "train" / "web-00000.jsonl", [
        {"text": "clean text about foxes", "source": "web"},
        {"text": "a scraped chat log <|user|> hi <|assistant|> hello", "source": "web"}])
    leak = scan_for_markers(tmp_path)
    assert leak["verdict"] == "warning" and leak["found"] == {"<|user|>": 1, "<|assistant|>": 1}
    assert leak["locations"][0]["line"] == 2 and leak["locations"][0]["file"] == "web-00000.jsonl"
    (tmp_path / "train" / "web-00000.jsonl").write_text('{"text": "clean"}\n')
    assert scan_for_markers(tmp_path)["verdict"] == "ok"


def _evaluation(tmp_path, val_loss, unigram_loss):
    path = tmp_path / "eval.json"
    path.write_text(json.dumps({"val_loss": val_loss, "unigram_loss": unigram_loss,
                                "domains": {"web": {"loss": val_loss, "unigram_loss": unigram_loss, "bpb": 2.5}}}))
    return path


def test_a_base_barely_beating_unigram_is_refused_with_its_numbers(tmp_path):
    from scratchlm.sft.base_check import check_base

    with pytest.raises(UserError) as e:
        check_base(tmp_path / "ck", _evaluation(tmp_path, 6.695, 6.663), force=False)
    message = str(e.value)
    assert "\n" not in message and "6.695" in message and "6.663" in message and "10%" in message
    assert "pretraining" in message and "--force" in message
    with pytest.raises(UserError, match="too weak"):  # 5% below unigram is still "barely"
        check_base(tmp_path / "ck", _evaluation(tmp_path, 6.33, 6.663), force=False)


def test_force_fine_tunes_a_weak_base_with_a_warning(tmp_path, capsys):
    from scratchlm.sft.base_check import check_base

    verdict, forced = check_base(tmp_path / "ck", _evaluation(tmp_path, 6.695, 6.663), force=True)
    assert verdict["level"] == "weak"
    # recorded with the fine-tuning, its figures named (forced.forced_record)
    assert [(f["stage"], f["verdict"], f["forced_by"]) for f in forced] == [("sft", "base quality", "--force")]
    assert "6.695" in forced[0]["summary"]
    captured = capsys.readouterr()
    assert "warning: base checkpoint" in captured.err + captured.out


def test_a_good_base_passes_and_an_unevaluated_one_needs_force(tmp_path):
    from scratchlm.sft.base_check import check_base

    verdict, forced = check_base(tmp_path / "ck", _evaluation(tmp_path, 4.23, 7.07), force=False)
    assert verdict["level"] == "ok" and forced == []
    with pytest.raises(UserError, match="has no evaluation"):
        check_base(tmp_path / "ck", None, force=False)
    verdict, forced = check_base(tmp_path / "ck", None, force=True)
    assert verdict is None and forced[0]["verdict"] == "base evaluated"


def test_an_evaluation_without_a_finite_loss_is_refused_like_no_evaluation(tmp_path):
    from scratchlm.sft.base_check import check_base

    with pytest.raises(UserError, match="not judged by its evaluation"):
        check_base(tmp_path / "ck", _evaluation(tmp_path, float("nan"), 6.663), force=False)
    assert check_base(tmp_path / "ck", _evaluation(tmp_path, float("nan"), 6.663), force=True)[0]["level"] == "unknown"
