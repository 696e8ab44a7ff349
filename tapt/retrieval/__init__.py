"""Retrieval: exact FAISS search, pytrec_eval metrics, evaluation reports."""
