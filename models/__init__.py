"""The model layer: how any stage calls any model.

``client`` (``ModelPool``: cached, counted calls), ``backends`` (OpenAI-compatible servers,
vLLM offline, the embedded llama.cpp server, scripted models), ``cache`` (the SQLite response
cache), ``requests`` (what is asked and answered), ``accounting`` (calls, cache hits, tokens),
``schedule`` (model-major execution with early elimination), ``labels`` and ``json_replies``
(the one strict reader of closed-set and JSON replies).
"""
