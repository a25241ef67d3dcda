"""Write services of the brain (STYLE rule 3): ``<entity>_<action>(*, ...)``."""
