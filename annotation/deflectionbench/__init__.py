"""VLM-DeflectionBench stages after Stage I: knowledge pairing with mined hard negatives
(Stage II, ``pairing`` and ``mining``) and oracle quality control (Stage III, ``oracle``)."""
