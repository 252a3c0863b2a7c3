"""Which test observes the effect of each option of each command (#65: every setting a command takes has a test
that observes its effect): the option given through the command's own parsing, and an assertion that would fail
without its effect. A new option goes here with its tests (``tests/test_options.py`` checks that every option of
every command is placed, and that every test named exists)."""

from __future__ import annotations

OBSERVED: dict[str, dict[str, list[str]]] = {
    "translate": {
        "ckpt": [
            "test_translate.py::test_one_output_line_per_input_line_in_order",
            "test_quality_tools.py::test_ensemble_members_must_share_their_vocabularies",
            "test_ctranslate2.py::test_translate_py_on_the_engine_prints_what_it_prints_on_the_checkpoint",
        ],
        "attention_backends": [
            "test_kernels.py::test_a_commands_kernel_options_are_what_its_translations_run_with",
        ],
        "float32_matmul": [
            "test_kernels.py::test_a_commands_kernel_options_are_what_its_translations_run_with",
        ],
        "beam_size": [
            "test_translate.py::test_one_output_line_per_input_line_in_order",
            "test_translate.py::test_stdout_carries_only_translations",
            "test_serve.py::test_answers_are_translate_py_s",
        ],
        "nbest": [
            "test_translate.py::test_nbest_sorted_by_score",
            "test_translate.py::test_lines_that_sentencepiece_empties_are_empty_lines_everywhere",
            "test_serve.py::test_answers_are_translate_py_s",
        ],
        "max_src_len": [
            "test_serve.py::test_every_kind_of_line_is_answered_as_translate_py_answers_it",
        ],
        "long_lines": [
            "test_serve.py::test_every_kind_of_line_is_answered_as_translate_py_answers_it",
        ],
        "align_layer": [
            "test_viewer.py::test_align_options_pick_the_attention_and_bad_ones_are_one_line",
        ],
        "align_head": [
            "test_viewer.py::test_align_options_pick_the_attention_and_bad_ones_are_one_line",
        ],
        "align_readout": [
            "test_viewer.py::test_align_options_pick_the_attention_and_bad_ones_are_one_line",
        ],
        "align_links": [
            "test_viewer.py::test_align_options_pick_the_attention_and_bad_ones_are_one_line",
        ],
        "input": [
            "test_translate.py::test_one_output_line_per_input_line_in_order",
            "test_translate.py::test_nbest_sorted_by_score",
        ],
        "output": [
            "test_translate.py::test_a_beam_beyond_the_model_s_vocabulary_is_one_line_whose_advice_works",
            "test_translate.py::test_an_output_into_a_named_pipe_is_written_into_it_never_replaced",
        ],
        "attention_dir": [
            "test_translate.py::test_attention_export",
        ],
        "html": [
            "test_viewer.py::test_the_page_is_self_contained_and_carries_the_data",
            "test_viewer.py::test_a_person_picks_a_layer_a_head_a_readout_and_links_in_a_real_browser",
        ],
        "alignments": [
            "test_viewer.py::test_pharaoh_links_are_the_most_attended_words",
            "test_translate.py::test_lines_that_sentencepiece_empties_are_empty_lines_everywhere",
        ],
        "seen": ["test_scores.py::test_translate_splits_its_reference_scores_by_the_training_file"],
        "ref": [
            "test_translate.py::test_reference_scores_equal_sacrebleu_on_the_output",
            "test_translate.py::test_reference_scores_and_python_api",
        ],
        "device": [
            "test_option_effects.py::test_device_and_threads_are_what_the_model_runs_with",
        ],
        "threads": [
            "test_option_effects.py::test_device_and_threads_are_what_the_model_runs_with",
        ],
        "compute_type": [
            "test_ctranslate2.py::test_the_compute_type_is_the_engine_s_in_every_command",
        ],
        "length_penalty": [
            "test_option_effects.py::test_the_length_penalty_changes_the_scores_and_the_output_budget_the_length",
        ],
        "max_len_a": [
            "test_option_effects.py::test_the_length_penalty_changes_the_scores_and_the_output_budget_the_length",
        ],
        "max_len_b": [
            "test_option_effects.py::test_the_length_penalty_changes_the_scores_and_the_output_budget_the_length",
        ],
        "batch_size": [
            "test_option_effects.py::test_batch_size_and_batch_type_cut_the_batches_and_leave_the_translations",
        ],
        "batch_type": [
            "test_option_effects.py::test_batch_size_and_batch_type_cut_the_batches_and_leave_the_translations",
        ],
        "interactive": [
            "test_option_effects.py::test_interactive_translates_each_line_typed_at_the_prompt",
        ],
    },
    "align": {
        "ckpt": [
            "test_align.py::test_align_prints_links_and_with_gold_their_aer_precision_and_recall",
        ],
        "attention_backends": [
            "test_kernels.py::test_a_commands_kernel_options_are_what_its_translations_run_with",
        ],
        "float32_matmul": [
            "test_kernels.py::test_a_commands_kernel_options_are_what_its_translations_run_with",
        ],
        "max_src_len": [
            "test_ctranslate2.py::test_aligning_on_the_engine_reads_long_pairs_as_long_lines_says",
        ],
        "long_lines": [
            "test_ctranslate2.py::test_aligning_on_the_engine_reads_long_pairs_as_long_lines_says",
        ],
        "input": [
            "test_align.py::test_align_prints_links_and_with_gold_their_aer_precision_and_recall",
        ],
        "align_to": [
            "test_align.py::test_align_prints_links_and_with_gold_their_aer_precision_and_recall",
        ],
        "gold": [
            "test_align.py::test_align_prints_links_and_with_gold_their_aer_precision_and_recall",
        ],
        "align_layer": [
            "test_viewer.py::test_align_options_pick_the_attention_and_bad_ones_are_one_line",
        ],
        "align_head": [
            "test_viewer.py::test_align_options_pick_the_attention_and_bad_ones_are_one_line",
        ],
        "align_readout": [
            "test_viewer.py::test_align_options_pick_the_attention_and_bad_ones_are_one_line",
        ],
        "align_links": [
            "test_viewer.py::test_align_options_pick_the_attention_and_bad_ones_are_one_line",
            "test_translate.py::test_guided_models_are_read_as_agrees_best_with_their_guide_unless_told_how",
            "test_guided.py::test_guidance_in_the_full_context_pass_is_what_alignments_read_after_training",
        ],
        "alignments": [
            "test_translate.py::test_models_adapted_to_the_pairs_they_align_learn_them_and_align_py_aligns_with_them",
            "test_serve.py::test_a_reference_per_line_is_aligned_as_align_py_aligns_it",
        ],
        "attention_dir": [
            "test_serve.py::test_a_reference_per_line_is_aligned_as_align_py_aligns_it",
            "test_guided.py::test_guidance_in_the_full_context_pass_is_what_alignments_read_after_training",
        ],
        "reverse_ckpt": [
            "test_translate.py::test_a_model_trained_the_other_way_aligns_too_and_both_links_are_symmetrised",
            "test_serve.py::test_with_a_model_trained_the_other_way_a_reference_is_aligned_by_both_as_align_py_does",
        ],
        "symmetrisation": [
            "test_translate.py::test_a_model_trained_the_other_way_aligns_too_and_both_links_are_symmetrised",
            "test_serve.py::test_with_a_model_trained_the_other_way_a_reference_is_aligned_by_both_as_align_py_does",
        ],
        "adapt_epochs": [
            "test_translate.py::test_models_adapted_to_the_pairs_they_align_learn_them_and_align_py_aligns_with_them",
            "test_translate.py::test_links_given_to_adapt_with_guide_the_attention_the_aligner_reads_and_align_py_takes_them",
        ],
        "adapt_lr": [
            "test_translate.py::test_models_adapted_to_the_pairs_they_align_learn_them_and_align_py_aligns_with_them",
        ],
        "adapt_links": [
            "test_translate.py::test_links_given_to_adapt_with_guide_the_attention_the_aligner_reads_and_align_py_takes_them",
            "test_translate.py::test_guided_models_are_read_as_agrees_best_with_their_guide_unless_told_how",
        ],
        "adapt_align_weight": [
            "test_translate.py::test_links_given_to_adapt_with_guide_the_attention_the_aligner_reads_and_align_py_takes_them",
        ],
        "device": [
            "test_option_effects.py::test_device_and_threads_are_what_the_model_runs_with",
        ],
        "threads": [
            "test_option_effects.py::test_device_and_threads_are_what_the_model_runs_with",
        ],
        "compute_type": [
            "test_ctranslate2.py::test_the_compute_type_is_the_engine_s_in_every_command",
        ],
        "html": [
            "test_option_effects.py::test_align_py_s_viewer_shows_the_given_pairs_with_the_scores_its_length_penalty_gives",
        ],
        "length_penalty": [
            "test_option_effects.py::test_align_py_s_viewer_shows_the_given_pairs_with_the_scores_its_length_penalty_gives",
        ],
        "adapt_corpus": [
            "test_option_effects.py::test_eflomal_s_options_reach_the_links_that_guide_adapting",
        ],
        "adapt_draws": [
            "test_option_effects.py::test_eflomal_s_options_reach_the_links_that_guide_adapting",
        ],
        "adapt_lines": [
            "test_option_effects.py::test_eflomal_s_options_reach_the_links_that_guide_adapting",
        ],
    },
    "serve": {
        "ckpt": [
            "test_serve.py::test_32_clients_get_translate_py_s_answers",
            "test_serve.py::test_96_concurrent_requests_each_get_their_own_lines",
        ],
        "attention_backends": [
            "test_kernels.py::test_a_commands_kernel_options_are_what_its_translations_run_with",
        ],
        "float32_matmul": [
            "test_kernels.py::test_a_commands_kernel_options_are_what_its_translations_run_with",
        ],
        "beam_size": [
            "test_serve.py::test_32_clients_get_translate_py_s_answers",
            "test_serve.py::test_sigterm_answers_what_is_in_flight_then_exits_0",
            "test_serve.py::test_96_concurrent_requests_each_get_their_own_lines",
            "test_serve.py::test_a_person_types_french_and_sees_the_translation_and_its_attention",
        ],
        "max_src_len": [
            "test_serve.py::test_sigterm_with_a_long_request_and_a_stalled_client_in_flight",
        ],
        "max_queue": [
            "test_serve.py::test_a_full_queue_answers_503_with_retry_after",
        ],
        "max_chars": [
            "test_serve.py::test_a_person_types_french_and_sees_the_translation_and_its_attention",
        ],
        "body_timeout": [
            "test_serve.py::test_hostile_clients_get_one_line_and_the_others_their_answers",
        ],
        "device": [
            "test_option_effects.py::test_device_and_threads_are_what_the_model_runs_with",
        ],
        "threads": [
            "test_option_effects.py::test_device_and_threads_are_what_the_model_runs_with",
        ],
        "compute_type": [
            "test_ctranslate2.py::test_the_compute_type_is_the_engine_s_in_every_command",
        ],
        "length_penalty": [
            "test_option_effects.py::test_the_server_searches_and_batches_as_its_options_say_as_translate_py_does",
        ],
        "max_len_a": [
            "test_option_effects.py::test_the_server_searches_and_batches_as_its_options_say_as_translate_py_does",
        ],
        "max_len_b": [
            "test_option_effects.py::test_the_server_searches_and_batches_as_its_options_say_as_translate_py_does",
        ],
        "nbest": [
            "test_option_effects.py::test_the_server_searches_and_batches_as_its_options_say_as_translate_py_does",
        ],
        "batch_size": [
            "test_option_effects.py::test_the_server_searches_and_batches_as_its_options_say_as_translate_py_does",
        ],
        "batch_type": [
            "test_option_effects.py::test_the_server_searches_and_batches_as_its_options_say_as_translate_py_does",
        ],
        "long_lines": [
            "test_option_effects.py::test_the_server_searches_and_batches_as_its_options_say_as_translate_py_does",
        ],
        "align_layer": [
            "test_option_effects.py::test_the_server_reads_the_attention_its_options_choose_as_align_py_does",
        ],
        "align_head": [
            "test_option_effects.py::test_the_server_reads_the_attention_its_options_choose_as_align_py_does",
        ],
        "align_readout": [
            "test_option_effects.py::test_the_server_reads_the_attention_its_options_choose_as_align_py_does",
        ],
        "align_links": [
            "test_option_effects.py::test_the_server_reads_the_attention_its_options_choose_as_align_py_does",
        ],
        "reverse_ckpt": [
            "test_option_effects.py::test_the_server_reads_the_attention_its_options_choose_as_align_py_does",
        ],
        "symmetrisation": [
            "test_option_effects.py::test_the_server_reads_the_attention_its_options_choose_as_align_py_does",
        ],
        "host": [
            "test_option_effects.py::test_the_server_listens_gathers_and_logs_as_its_options_say",
        ],
        "port": [
            "test_option_effects.py::test_the_server_listens_gathers_and_logs_as_its_options_say",
        ],
        "max_wait_ms": [
            "test_option_effects.py::test_the_server_listens_gathers_and_logs_as_its_options_say",
        ],
        "batch_tokens": [
            "test_option_effects.py::test_the_server_listens_gathers_and_logs_as_its_options_say",
        ],
        "no_batching": [
            "test_option_effects.py::test_the_server_listens_gathers_and_logs_as_its_options_say",
            "test_option_effects.py::test_every_request_is_answered_alone_without_batching",
        ],
        "max_lines": [
            "test_option_effects.py::test_the_server_s_limits_are_its_options",
        ],
        "max_body": [
            "test_option_effects.py::test_the_server_s_limits_are_its_options",
        ],
        "max_beam": [
            "test_option_effects.py::test_the_server_s_limits_are_its_options",
        ],
        "no_access_log": [
            "test_option_effects.py::test_the_server_listens_gathers_and_logs_as_its_options_say",
        ],
    },
    "export": {
        "ckpt": [
            "test_ctranslate2.py::test_every_transformer_variant_exports_as_the_same_function",
            "test_ctranslate2.py::test_a_quantised_export_translates",
        ],
        "out": [
            "test_ctranslate2.py::test_a_quantised_export_translates",
        ],
        "quantization": [
            "test_ctranslate2.py::test_a_quantised_export_translates",
        ],
        "align_layer": [
            "test_ctranslate2.py::test_the_engine_attention_is_the_exported_head",
            "test_ctranslate2.py::test_a_head_mean_exports_as_all_heads_of_the_layer",
        ],
        "align_head": [
            "test_ctranslate2.py::test_the_engine_attention_is_the_exported_head",
            "test_ctranslate2.py::test_a_head_mean_exports_as_all_heads_of_the_layer",
            "test_ctranslate2.py::test_every_transformer_variant_exports_as_the_same_function",
        ],
        "max_positions": [
            "test_ctranslate2.py::test_lines_past_the_engine_s_table_are_cut_as_long_lines_says_or_refused_up_front",
            "test_ctranslate2.py::test_the_server_on_a_short_table_refuses_at_start_or_answers_every_line",
            "test_ctranslate2.py::test_the_engine_scores_a_source_past_1024_pieces_whole",
        ],
        "align_readout": [
            "test_ctranslate2.py::test_the_readout_and_links_exported_are_how_the_engine_s_links_are_read",
        ],
        "align_links": [
            "test_ctranslate2.py::test_the_readout_and_links_exported_are_how_the_engine_s_links_are_read",
        ],
    },
    "average": {
        "ckpt": [
            "test_quality_tools.py::test_averaging_checkpoints",
        ],
        "out": [
            "test_quality_tools.py::test_averaging_checkpoints",
        ],
    },
}
