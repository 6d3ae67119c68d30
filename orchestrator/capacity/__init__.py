"""The capacity answer: the highest rate a topology holds within an SLO, searched closed-loop
per member count (:mod:`.search`, :mod:`.slo`), run as the steps of one run per count
(:mod:`.plan`, :mod:`.runner`)."""
