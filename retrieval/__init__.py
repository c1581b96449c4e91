"""Retrieval: text and image encoders (``encoders``), FAISS vector indexes cached on disk
(``vector_index``), knowledge bases as document tables (``kb``), passage chunking at
sentence boundaries (``chunking``) and rerankers (``rerank``)."""
