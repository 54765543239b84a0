import pytest

from fuseflow.ir.tokens import (
    DONE,
    EMPTY,
    REPEAT,
    decode,
    encode,
    format_stream,
    parse_stream,
    stop,
    wrap,
)


def test_text_round_trip():
    text = "0,2,S0,5,S1,D"
    toks = parse_stream(text)
    assert toks == [0, 2, stop(0), 5, stop(1), DONE]
    assert format_stream(toks) == text
    assert parse_stream("N,R,S") == [EMPTY, REPEAT, stop(0)]


def test_interned_controls():
    assert stop(3) is parse_stream("S3")[0]
    assert parse_stream("D")[0] is DONE


@pytest.mark.parametrize("bad", ["x", "1.2.3", "Sx"])
def test_bad_token_names_it(bad):
    with pytest.raises(ValueError, match=repr(bad)):
        parse_stream(bad)


def test_word_encoding_matches_design():
    w = 16
    # the word of README.md "Tokens and streams": flag bit W, opcode bits 9..8 (0 stop, 1 done,
    # 2 empty), level bits 7..0
    assert encode(stop(3), w) == (1 << 16) | 3
    assert encode(DONE, w) == (1 << 16) | (1 << 8)
    assert encode(EMPTY, w) == (1 << 16) | (2 << 8)
    assert encode(5, w) == 5
    assert encode(-1, w) == 0xFFFF
    assert encode(REPEAT, w, repsig=True) == 1
    for tok in [0, 7, 65535, stop(0), stop(255), DONE, EMPTY]:
        assert decode(encode(tok, w), w) == tok or decode(encode(tok, w), w) is tok
    assert decode(encode(-5, 32), 32, signed=True) == -5


def test_encode_rejects_out_of_range():
    with pytest.raises(ValueError, match="does not fit"):
        encode(1 << 16, 16)
    with pytest.raises(ValueError, match="repsig"):
        encode(REPEAT, 16)


def test_wrap():
    assert wrap(2**31, 32) == -(2**31)
    assert wrap(-(2**31) - 1, 32) == 2**31 - 1
    assert wrap(123, 32) == 123


def test_vector_tokens_text_and_words():
    from fuseflow.ir.tokens import Vec, is_data

    toks = parse_stream("(1|-2|3|4),S0,N,(0|7|0|0),D")
    assert toks[0] == (1, -2, 3, 4) and isinstance(toks[0], Vec) and is_data(toks[0])
    assert format_stream(toks) == "(1|-2|3|4),S0,N,(0|7|0|0),D"
    # lane l in bits [l*w, (l+1)*w), the flag above all lanes; control words in the low bits
    w = 8
    assert encode(Vec((1, -2, 3, 4)), w, lanes=4) == 1 | (0xFE << 8) | (3 << 16) | (4 << 24)
    assert encode(stop(2), w, lanes=4) == (1 << 32) | 2
    assert encode(DONE, w, lanes=4) == (1 << 32) | (1 << 8)
    for tok in toks:
        assert decode(encode(tok, w, lanes=4), w, signed=True, lanes=4) == tok
    with pytest.raises(TypeError, match="4-lane stream carries vectors of 4 lanes"):
        encode(Vec((1, 2)), w, lanes=4)
    with pytest.raises(TypeError, match="got 5"):
        encode(5, w, lanes=4)
    with pytest.raises(ValueError, match="does not fit"):
        encode(Vec((1, 300)), w, lanes=2)
    with pytest.raises(ValueError, match="at least 2 lanes"):
        Vec((1,))
    with pytest.raises(ValueError, match=r"'\(1\|x\)'"):
        parse_stream("(1|x)")
