"""RefLVQA stages (seed paper, section 3): ``relevance`` (is the image relevant to the
question), ``necessity`` (is the image needed to answer), ``factcheck`` (which answer
sentences are fact-checkable) and ``citations`` (supporting documents per sentence)."""
