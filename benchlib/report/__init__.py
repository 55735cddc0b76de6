"""The report wing: the cells and their forms.

report.py (the cells, report.txt, junit.xml), report_json.py, report_html.py,
forms.py (writes them), the entropy measure and its table and plots, the image
matrix's report, the budgets, the throughput figures.

Rule (pytest/test_architecture.py): never imports the commands.
"""
