"""The textbook models as plain ``nn.Module``s, free of Lightning: masked softmax and the attention scores
(``attention.py``), the bidirectional GRU encoder (``encoder.py``), the Bahdanau and Luong decoders (``decoders.py``),
the Transformer (``transformer.py``), ``Seq2Seq``, which joins an encoder, a decoder and the output layer
(``seq2seq.py``) and the contract of its parts (``parts.py``), the losses (``loss.py``), dropout (``dropout.py``),
decoding caches (``cache.py``) and mixed precision: recurrent states, the weights cast once a step (``precision.py``).

May import: nmt.specials, nmt.errors, nmt.progress, nmt.hardware, nmt.commands, nmt.scores, nmt.bounds.
Start with: attention.py (masked softmax, then AdditiveAttention and DotProductAttention), then decoders.py.
"""
