"""irbook.course: the course's own code, apart from the evaluator.

`pip install irbook` gives the evaluator (`irbook.metrics`, `stats`, `compare`, `power`,
`unjudged`, `ppi`, `ranking`, `labelling`, `spans`, `cli`): it never imports this
package. What is here serves the chapters: the datasets and their questions
(`fastbook`, `jqara`, `chunking`), search (`search.fulltext`, `search.dense`,
`search.colbert`, `search.fusion`), Part II's runs (`part2`), Japanese search
(`japanese`), synthetic questions and their checks (`synthetic`, `synthetic_eval`,
`noise`, `negatives`, `finetune`, `training_filters`) and model judges (`judges`).
It needs `pip install "irbook[course]"`.
"""
