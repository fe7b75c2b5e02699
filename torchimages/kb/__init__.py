"""The knowledge base kept by the indexes: read what an index serves of torch, torchvision and torchaudio
(pages and PEP 658 metadata, never a wheel), derive each build's facts, say how they differ from
compat.yaml and write the difference. `index` asks, `pages` parses what it answers, `derive` turns
wheels into facts, `diff` compares them with the file, `writer` applies the difference, `sync` ties
them together for the `kb` command."""
